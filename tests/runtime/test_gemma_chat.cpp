// Gemma 4's chat format: the prompt text as Google's Gemma 4 prompt format
// and the release's chat template write it (docs/gemma4_facts.md: turns
// <|turn>ROLE\n...<turn|>\n, "model" for the assistant, a system turn of its
// own, <|think|> opening the system turn when thinking is on, the large
// models' empty thought block after the generation prompt when it is off),
// the reply parser's reasoning and answer, and the choice of format for gemma4.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/expect_error.h"
#include "support/tokenizers.h"
#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/gemma_chat.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {
namespace gemma_chat_test {

const Tokenizer& gemma_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_json_text(
      build_synthetic_tokenizer({.specials = SyntheticSpecials::Gemma4}).tokenizer_json, "gemma4 test tokenizer");
  return tokenizer;
}

TEST(Gemma4Tokenizer, ControlTokensAtTheReleaseIds) {
  const Tokenizer& t = gemma_tokenizer();
  const std::pair<const char*, int32_t> ids[] = {
      {"<pad>", 0},        {"<eos>", 1},        {"<bos>", 2},    {"<unk>", 3},         {"<|tool_response>", 50},
      {"<|think|>", 98},   {"<|channel>", 100}, {"<channel|>", 101}, {"<|turn>", 105}, {"<turn|>", 106},
      {"\n", 107},         {"<0x00>", 109}};
  for (const auto& [token, id] : ids) EXPECT_EQ(t.token_id(token), id) << token;
  EXPECT_TRUE(t.is_special(105));
  EXPECT_FALSE(t.is_special(107));  // "\n" is an added token but not special
  EXPECT_FALSE(t.post_processor_adds_bos());  // add_bos_token false: the template writes <bos>
  // One id per marker; no "▁" prefix (Gemma's normalizer only replaces spaces).
  const std::vector<int32_t> ids_turn = t.encode("<|turn>user\nhi<turn|>\n");
  EXPECT_EQ(ids_turn.front(), 105);
  EXPECT_EQ(ids_turn[ids_turn.size() - 2], 106);
  EXPECT_EQ(ids_turn.back(), 107);
  EXPECT_EQ(t.decode(t.encode(" two  spaces, é 😀")), " two  spaces, é 😀");
}

TEST(Gemma4Render, TurnsSystemAndTheGenerationPrompt) {
  const std::vector<ChatMessage> chat = {{"user", "Hello."}, {"assistant", " Hi! "}, {"user", "\nWhat is 2+2?\n"}};
  EXPECT_EQ(render_gemma4(chat),
            "<bos><|turn>user\nHello.<turn|>\n<|turn>model\nHi!<turn|>\n<|turn>user\nWhat is 2+2?<turn|>\n"
            "<|turn>model\n<|channel>thought\n<channel|>");
  // Google's example: the system prompt is a turn of its own.
  const std::vector<ChatMessage> sys = {{"system", "You are a helpful assistant."}, {"user", "Hello."}};
  EXPECT_EQ(render_gemma4(sys, {.add_generation_prompt = false}),
            "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n<|turn>user\nHello.<turn|>\n");
  EXPECT_EQ(render_gemma4({{{"developer", "Be brief."}, {"user", "x"}}}, {.add_generation_prompt = false}),
            "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nx<turn|>\n");
}

TEST(Gemma4Render, ThinkingOpensTheSystemTurnAndDropsTheEmptyThought) {
  const ChatFormatOptions on = {.enable_thinking = true};
  EXPECT_EQ(render_gemma4({{{"user", "What is the water formula?"}}}, on),
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWhat is the water formula?<turn|>\n<|turn>model\n");
  EXPECT_EQ(render_gemma4({{{"system", "S"}, {"user", "U"}}}, on),
            "<bos><|turn>system\n<|think|>\nS<turn|>\n<|turn>user\nU<turn|>\n<|turn>model\n");
  // Off is the default; the small models' template adds no empty thought block.
  EXPECT_EQ(render_gemma4({{{"user", "U"}}}, {}, GemmaFlavor::Small), "<bos><|turn>user\nU<turn|>\n<|turn>model\n");
  EXPECT_EQ(render_gemma4({{{"user", "U"}}}, {.enable_thinking = false}),
            "<bos><|turn>user\nU<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(Gemma4Render, EarlierThoughtsAreStripped) {
  const std::vector<ChatMessage> chat = {
      {"user", "a"}, {"assistant", "<|channel>thought\nplan<channel|>The answer.", "reasoning kept apart"}, {"user", "b"}};
  EXPECT_EQ(render_gemma4(chat, {.add_generation_prompt = false}),
            "<bos><|turn>user\na<turn|>\n<|turn>model\nThe answer.<turn|>\n<|turn>user\nb<turn|>\n");
}

TEST(Gemma4Render, ToolsAndOtherRolesAreRefused) {
  auto refuses = [](const std::vector<ChatMessage>& m, const ChatFormatOptions& o, const char* part) {
    try {
      render_gemma4(m, o);
      ADD_FAILURE() << "expected an error naming " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refuses({{"user", "x"}}, {.tools = {{"get_weather"}}}, "without tools");
  refuses({{"user", "x"}, {"tool", "42"}}, {}, "tool result");
  refuses({{"user", "x"}, {"assistant", "", "", {{"f", "{}"}}}}, {}, "tool call");
  refuses({{"user", "x"}, {"narrator", "y"}}, {}, "narrator");
}

struct GemmaParsed {
  std::string reasoning, content;
  bool end_event = false;
  FinishReason finish = FinishReason::None;
};

GemmaParsed gemma_parse_ids(const std::vector<int32_t>& ids) {
  static auto format = make_gemma4_format(gemma_tokenizer(), {});
  auto p = format->make_parser({});
  GemmaParsed out;
  auto take = [&](const std::vector<ChatEvent>& events) {
    for (const ChatEvent& e : events) {
      if (e.kind == ChatEvent::Kind::Reasoning) out.reasoning += e.text;
      if (e.kind == ChatEvent::Kind::Content) out.content += e.text;
      if (e.kind == ChatEvent::Kind::End) out.end_event = true;
    }
  };
  for (int32_t id : ids) {
    if (p->done()) break;
    take(p->push(id));
  }
  take(p->finish());
  out.finish = p->finish_reason();
  EXPECT_EQ(p->reply().content, out.content);
  EXPECT_EQ(p->reply().reasoning, out.reasoning);
  return out;
}

GemmaParsed gemma_parse(const std::string& reply) { return gemma_parse_ids(gemma_tokenizer().encode(reply)); }

TEST(Gemma4Parser, ThoughtThenAnswer) {
  GemmaParsed r = gemma_parse("<|channel>thought\nWater is H2O.\n<channel|>The formula is H₂O 😀.<turn|>never shown");
  EXPECT_EQ(r.reasoning, "Water is H2O.\n");
  EXPECT_EQ(r.content, "The formula is H₂O 😀.");
  EXPECT_TRUE(r.end_event);
  EXPECT_EQ(r.finish, FinishReason::Stop);
}

TEST(Gemma4Parser, PlainAnswerAndEachStop) {
  for (const char* stop : {"<turn|>", "<eos>", "<|tool_response>"}) {
    GemmaParsed r = gemma_parse(std::string("Just this.") + stop + "x");
    EXPECT_EQ(r.reasoning, "") << stop;
    EXPECT_EQ(r.content, "Just this.") << stop;
    EXPECT_EQ(r.finish, FinishReason::Stop) << stop;
  }
  // The newline after an (empty) thought block is markup; other control tokens are dropped.
  EXPECT_EQ(gemma_parse("<|channel>thought\n<channel|>\nHi<|turn>there<turn|>").content, "Hithere");
  // A thought cut short is reasoning; one without a channel name is all reasoning.
  EXPECT_EQ(gemma_parse("<|channel>thought\nhalf").reasoning, "half");
  EXPECT_EQ(gemma_parse("<|channel>no name\nat all<channel|>ok").reasoning, "no name\nat all");
}

TEST(Gemma4Parser, GarbageNeverThrowsAndStaysValidText) {
  const Tokenizer& t = gemma_tokenizer();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> any(-3, t.vocab_size() + 3), control(0, 108);
  std::bernoulli_distribution pick_control(0.4);
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(pick_control(rng) ? control(rng) : any(rng));
    GemmaParsed r;
    EXPECT_NO_THROW(r = gemma_parse_ids(ids));
    EXPECT_NO_THROW((void)nlohmann::json(r.content).dump());  // valid UTF-8
    EXPECT_NO_THROW((void)nlohmann::json(r.reasoning).dump());
  }
}

TEST(Gemma4Format, ChosenForGemma4WithItsStopsAndFlavor) {
  const Tokenizer& t = gemma_tokenizer();
  for (const char* arch : {"gemma4", "gemma4_text"}) {
    auto format = make_chat_format(arch, t, std::vector<int32_t>{1, 106, 7});
    EXPECT_EQ(format->name(), "gemma4");
    EXPECT_EQ(format->stop_tokens(), (std::vector<int32_t>{106, 1, 50, 7}));
    EXPECT_TRUE(format->render({{{"user", "U"}}}, {}).ends_with("<|channel>thought\n<channel|>"));
  }
  // The synthetic template is the large models' (its text has the empty thought block); a
  // template without it is a small model's.
  const std::string config = build_synthetic_tokenizer({.specials = SyntheticSpecials::Gemma4}).tokenizer_config_json;
  const std::string large = nlohmann::json::parse(config)["chat_template"];
  EXPECT_TRUE(make_chat_format("gemma4", t, {}, large)->render({{{"user", "U"}}}, {}).ends_with("<channel|>"));
  EXPECT_TRUE(make_chat_format("gemma4", t, {}, "{{ bos_token }}{{ '<|turn>model\\n' }}")
                  ->render({{{"user", "U"}}}, {})
                  .ends_with("<|turn>model\n"));
  testing::expect_error([] { make_chat_format("gemma4", testing::tokenizer_without_added_tokens(), {}); },
                        {"<bos>"});
}

}  // namespace gemma_chat_test
}  // namespace
}  // namespace tern
