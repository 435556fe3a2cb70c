// The chat formats of the Llama-style MoE families: Mistral's [INST]
// (Mixtral), Tulu's (OLMoE) and Qwen1.5/Qwen2's ChatML (Qwen2-MoE), pinned to
// the strings their Hugging Face templates render; the refusals; the reply
// parser; and which format make_chat_format picks per architecture.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/tokenizers.h"
#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/chat_template.h"
#include "tern/runtime/plain_chat.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

const Tokenizer& mistral_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_json_text(
      build_synthetic_tokenizer({.specials = SyntheticSpecials::Mistral}).tokenizer_json, "mistral test tokenizer");
  return tokenizer;
}

// The synthetic BPE with only <|endoftext|> and <|padding|> added (no ChatML): OLMoE's kind.
const Tokenizer& neox_tokenizer() {
  static const Tokenizer tokenizer = [] {
    nlohmann::json j = nlohmann::json::parse(build_synthetic_tokenizer().tokenizer_json);
    int32_t id = j["added_tokens"][0]["id"].get<int32_t>();
    nlohmann::json added = nlohmann::json::array();
    for (const char* content : {"<|endoftext|>", "<|padding|>"})
      added.push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
    j["added_tokens"] = added;
    return Tokenizer::from_json_text(j.dump(), "neox test tokenizer");
  }();
  return tokenizer;
}

TEST(MistralChat, RendersAsMixtralInstructTemplate) {
  EXPECT_EQ(render_mistral_instruct(std::vector<ChatMessage>{{"user", "Hi"}}), "<s>[INST] Hi [/INST]");
  EXPECT_EQ(render_mistral_instruct(std::vector<ChatMessage>{{"user", "a"}, {"assistant", "b"}, {"user", "c"}}),
            "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
  // A leading system message goes before the first user message.
  EXPECT_EQ(render_mistral_instruct(std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Hi"}}),
            "<s>[INST] Be brief.\n\nHi [/INST]");
  EXPECT_EQ(render_mistral_instruct(std::vector<ChatMessage>{{"system", "Be brief."}}), "<s>[INST] Be brief. [/INST]");
}

TEST(MistralChat, RefusesWhatTheTemplateRefuses) {
  using V = std::vector<ChatMessage>;
  EXPECT_THROW(render_mistral_instruct(V{{"assistant", "x"}}), Error);
  EXPECT_THROW(render_mistral_instruct(V{{"user", "a"}, {"user", "b"}}), Error);
  EXPECT_THROW(render_mistral_instruct(V{{"user", "a"}, {"system", "b"}}), Error);
  EXPECT_THROW(render_mistral_instruct(V{{"user", "a"}, {"tool", "b"}}), Error);
  EXPECT_THROW(render_mistral_instruct(V{{"user", "a"}}, {.tools = {{"f"}}}), Error);
}

TEST(MistralChat, PromptStartsWithBosAndReplyIsPlainText) {
  const Tokenizer& t = mistral_tokenizer();
  auto format = make_chat_format("mixtral", t, {});
  EXPECT_EQ(format->name(), "mistral-instruct");
  const std::vector<ChatMessage> conversation = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  const std::vector<int32_t> ids = t.encode(format->render(conversation, {}));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), t.token_id("<s>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), t.token_id("</s>")), 1);  // after the first reply
  EXPECT_EQ(format->stop_tokens(), std::vector<int32_t>{t.token_id("</s>")});

  // The model writes "▁Hello▁world" then </s>: the reply is "Hello world".
  auto parser = format->make_parser({});
  std::string text;
  for (int32_t id : t.encode("Hello world"))
    for (const ChatEvent& e : parser->push(id)) text += e.text;
  EXPECT_FALSE(parser->done());
  const auto end = parser->push(t.token_id("</s>"));
  ASSERT_FALSE(end.empty());
  EXPECT_EQ(end.back().kind, ChatEvent::Kind::End);
  EXPECT_TRUE(parser->done());
  EXPECT_EQ(parser->finish_reason(), FinishReason::Stop);
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(parser->reply().content, "Hello world");
  EXPECT_TRUE(parser->push(t.token_id("<s>")).empty());  // after the end: ignored
}

TEST(TuluChat, RendersAsOlmoeInstructCard) {
  EXPECT_EQ(render_tulu(std::vector<ChatMessage>{{"user", "How are you?"}}),
            "<|endoftext|><|user|>\nHow are you?\n<|assistant|>\n");
  EXPECT_EQ(render_tulu(std::vector<ChatMessage>{{"system", "S"}, {"user", "a"}, {"assistant", "b"}, {"user", "c"}}),
            "<|endoftext|><|system|>\nS\n<|user|>\na\n<|assistant|>\nb<|endoftext|>\n<|user|>\nc\n<|assistant|>\n");
  EXPECT_EQ(render_tulu(std::vector<ChatMessage>{{"user", "a"}}, {.add_generation_prompt = false}),
            "<|endoftext|><|user|>\na\n");
  EXPECT_THROW(render_tulu(std::vector<ChatMessage>{{"tool", "x"}}), Error);
  EXPECT_THROW(render_tulu(std::vector<ChatMessage>{{"user", "x"}}, {.tools = {{"f"}}}), Error);
  auto format = make_chat_format("olmoe", neox_tokenizer(), {});
  EXPECT_EQ(format->name(), "tulu");
  EXPECT_EQ(format->stop_tokens(), std::vector<int32_t>{neox_tokenizer().token_id("<|endoftext|>")});
}

TEST(Qwen2Chat, RendersTheDefaultSystemPromptAndNoThinking) {
  EXPECT_EQ(render_qwen2_chatml(std::vector<ChatMessage>{{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_qwen2_chatml(std::vector<ChatMessage>{{"system", "S"}, {"user", "a"}, {"assistant", "b"}},
                                {.add_generation_prompt = false}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n");
  EXPECT_THROW(render_qwen2_chatml(std::vector<ChatMessage>{{"user", "x"}}, {.tools = {{"f"}}}), Error);

  const Tokenizer& t = testing::qwen3_tokenizer();
  auto format = make_chat_format("qwen2_moe", t, {});
  EXPECT_EQ(format->name(), "qwen2-chatml");
  EXPECT_EQ(make_chat_format("qwen3_moe", t, {})->name(), "qwen3-chatml");
  // <think> is not markup for Qwen2: it is answer text.
  auto parser = format->make_parser({});
  std::string text;
  for (int32_t id : t.encode("<think>x</think>y"))
    for (const ChatEvent& e : parser->push(id)) text += e.text;
  parser->push(t.token_id("<|im_end|>"));
  EXPECT_EQ(parser->reply().content, "<think>x</think>y");
  EXPECT_TRUE(parser->reply().reasoning.empty());
}

TEST(ChatFormatChoice, ArchitecturesWithoutAFormatSayWhatToUse) {
  EXPECT_THROW(make_chat_format("qwen3_moe", mistral_tokenizer(), {}), Error);
  EXPECT_THROW(make_chat_format("mixtral", neox_tokenizer(), {}), Error);  // no <s> / </s>
}

}  // namespace
}  // namespace tern
