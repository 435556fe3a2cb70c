// The harmony chat format (gpt-oss): rendering pinned to the Hugging Face
// chat template's exact strings (docs/gpt_oss_facts.md §6), the output
// parser on well-formed, split, odd and random replies, and the choice of
// format per model. Qwen3's ChatML is in test_chat_template.cpp.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/harmony.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"
#include "support/expect_error.h"
#include "support/tokenizers.h"

namespace tern {

using testing::qwen3_tokenizer;

namespace {

// GPT-OSS's added tokens in id order (199998..200018), all special.
const char* const kHarmonyAddedTokens[] = {
    "<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>", "<|return|>",
    "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>", "<|end|>", "<|message|>",
    "<|reserved_200009|>", "<|reserved_200010|>", "<|reserved_200011|>", "<|call|>", "<|reserved_200013|>",
    "<|reserved_200014|>", "<|reserved_200015|>", "<|reserved_200016|>", "<|reserved_200017|>",
    "<|endofprompt|>"};

// The synthetic test BPE with GPT-OSS's special tokens instead of Qwen3's.
const Tokenizer& harmony_tokenizer() {
  static const Tokenizer tokenizer = [] {
    nlohmann::json j = nlohmann::json::parse(build_synthetic_tokenizer().tokenizer_json);
    int32_t id = j["added_tokens"][0]["id"].get<int32_t>();
    nlohmann::json added = nlohmann::json::array();
    for (const char* content : kHarmonyAddedTokens)
      added.push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
    j["added_tokens"] = added;
    return Tokenizer::from_json_text(j.dump(), "harmony test tokenizer");
  }();
  return tokenizer;
}

int32_t id_of(const char* token) {
  int32_t id = harmony_tokenizer().token_id(token);
  EXPECT_GE(id, 0) << token;
  return id;
}

std::vector<int32_t> model_stops() { return {id_of("<|return|>"), id_of("<|endoftext|>"), id_of("<|call|>")}; }

const std::string kSystem =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n\n"
    "Reasoning: medium\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>";

ChatFormatOptions on_date(std::string effort = "medium") {
  ChatFormatOptions o;
  o.reasoning_effort = std::move(effort);
  o.date = "2025-06-28";
  return o;
}

// ---- rendering -----------------------------------------------------------

TEST(HarmonyRender, SingleUserTurnEndsWithTheAssistantStart) {
  EXPECT_EQ(render_harmony({{"user", "What is 2 + 2?"}}, on_date()),
            kSystem + "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant");
}

TEST(HarmonyRender, LeadingSystemOrDeveloperMessageBecomesDeveloperInstructions) {
  const std::string expected = kSystem +
                               "<|start|>developer<|message|># Instructions\n\nAnswer in French.\n\n<|end|>"
                               "<|start|>user<|message|>Hi<|end|><|start|>assistant";
  EXPECT_EQ(render_harmony({{"system", "Answer in French."}, {"user", "Hi"}}, on_date()), expected);
  EXPECT_EQ(render_harmony({{"developer", "Answer in French."}, {"user", "Hi"}}, on_date()), expected);
  // An empty one renders no developer message, and a later one is dropped, as the template does.
  EXPECT_EQ(render_harmony({{"system", ""}, {"user", "Hi"}}, on_date()),
            kSystem + "<|start|>user<|message|>Hi<|end|><|start|>assistant");
  EXPECT_EQ(render_harmony({{"user", "Hi"}, {"system", "late"}}, on_date()),
            kSystem + "<|start|>user<|message|>Hi<|end|><|start|>assistant");
}

TEST(HarmonyRender, EarlierTurnsKeepTheFinalAnswerAndDropTheAnalysis) {
  std::vector<ChatMessage> conversation = {
      {"system", "Be brief."},
      {"user", "What is 2 + 2?"},
      {"assistant", "4.", "The user asks a sum. 2 + 2 = 4."},
      {"user", "And 3 + 3?"},
  };
  EXPECT_EQ(render_harmony(conversation, on_date()),
            kSystem +
                "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
                "<|start|>user<|message|>What is 2 + 2?<|end|>"
                "<|start|>assistant<|channel|>final<|message|>4.<|end|>"
                "<|start|>user<|message|>And 3 + 3?<|end|>"
                "<|start|>assistant");
}

TEST(HarmonyRender, WithoutGenerationPromptTheLastReplyKeepsItsAnalysisAndReturns) {
  ChatFormatOptions o = on_date();
  o.add_generation_prompt = false;
  EXPECT_EQ(render_harmony({{"user", "Hi"}, {"assistant", "Hello!", "Greet back."}}, o),
            kSystem +
                "<|start|>user<|message|>Hi<|end|>"
                "<|start|>assistant<|channel|>analysis<|message|>Greet back.<|end|>"
                "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>");
}

TEST(HarmonyRender, ReasoningEffortLine) {
  for (std::string effort : {"low", "medium", "high"}) {
    std::string s = render_harmony({{"user", "x"}}, on_date(effort));
    EXPECT_NE(s.find("\n\nReasoning: " + effort + "\n\n# Valid channels:"), std::string::npos) << effort;
  }
  EXPECT_THROW(render_harmony({{"user", "x"}}, on_date("extreme")), Error);
  EXPECT_THROW(render_harmony({{"user", "x"}}, on_date("")), Error);
}

TEST(HarmonyRender, DateIsInjectedOrToday) {
  ChatFormatOptions o = on_date();
  o.date = "1999-12-31";
  EXPECT_NE(render_harmony({{"user", "x"}}, o).find("\nCurrent date: 1999-12-31\n\n"), std::string::npos);
  auto today = [] {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char text[16];
    std::strftime(text, sizeof text, "%Y-%m-%d", &local);
    return std::string(text);
  };
  const std::string before = today();
  const std::string s = render_harmony({{"user", "x"}});  // default options: today, medium
  const std::string after = today();
  EXPECT_TRUE(s.find("\nCurrent date: " + before + "\n\nReasoning: medium\n\n") != std::string::npos ||
              s.find("\nCurrent date: " + after + "\n\nReasoning: medium\n\n") != std::string::npos)
      << s;
  o.date = "28/06/2025";
  EXPECT_THROW(render_harmony({{"user", "x"}}, o), Error);
}

TEST(HarmonyRender, ToolCallsAndToolResults) {
  ChatMessage call{"assistant", "", "Need the weather.", {{"get_weather", "{\"city\": \"Paris\"}"}}};
  const std::string rendered_call =
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>";
  const std::string rendered_result =
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"20 \\\"C\\\"\\nsunny\"<|end|>";
  // No final answer after the call yet: its analysis is kept (the one exception).
  EXPECT_EQ(render_harmony({{"user", "Weather?"}, call, {"tool", "20 \"C\"\nsunny"}}, on_date()),
            kSystem + "<|start|>user<|message|>Weather?<|end|>" +
                "<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>" + rendered_call +
                rendered_result + "<|start|>assistant");
  // A later final answer drops it.
  EXPECT_EQ(render_harmony({{"user", "Weather?"}, call, {"tool", "20 \"C\"\nsunny"}, {"assistant", "Sunny."},
                            {"user", "Thanks"}},
                           on_date()),
            kSystem + "<|start|>user<|message|>Weather?<|end|>" + rendered_call + rendered_result +
                "<|start|>assistant<|channel|>final<|message|>Sunny.<|end|>"
                "<|start|>user<|message|>Thanks<|end|><|start|>assistant");
}

TEST(HarmonyRender, RejectsWhatTheTemplateRejects) {
  EXPECT_THROW(render_harmony({{"robot", "x"}}), Error);
  EXPECT_THROW(render_harmony({{"user", "x"}, {"tool", "orphan result"}}), Error);
  EXPECT_THROW(render_harmony({{"user", "x"}, {"assistant", "<|channel|>final<|message|>hi"}, {"user", "y"}}), Error);
  EXPECT_THROW(render_harmony({{"user", "x"}, {"assistant", "a", "r", {{"f", "{}"}}}}), Error);
}

TEST(HarmonyRender, JsonStringLiteralMatchesPythonJsonDumps) {
  // json.dumps(s, ensure_ascii=False) for s = 'a"b\\c\n\t\x01é'
  EXPECT_EQ(json_string_literal("a\"b\\c\n\t\x01\xc3\xa9\x7f"), "\"a\\\"b\\\\c\\n\\t\\u0001\xc3\xa9\x7f\"");
}

TEST(HarmonyRender, StructuralTokensEncodeAsSingleIds) {
  const Tokenizer& t = harmony_tokenizer();
  std::string s = render_harmony({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}, on_date());
  std::vector<int32_t> ids = t.encode(s);
  auto count = [&](const char* token) { return std::count(ids.begin(), ids.end(), id_of(token)); };
  EXPECT_EQ(count("<|start|>"), 5);
  EXPECT_EQ(count("<|end|>"), 4);
  EXPECT_EQ(count("<|message|>"), 4);
  EXPECT_EQ(count("<|channel|>"), 1);
  EXPECT_EQ(t.decode(ids), s);
}

// ---- output parser -------------------------------------------------------

struct Parsed {
  std::string reasoning, content, calls;
  bool end_event = false;
  std::vector<ChatEvent> events;
};

// Pushes ids one by one; collects events. Stops pushing once the parser is done.
Parsed parse(const std::vector<int32_t>& ids, ChatOutputParser& p, bool finish = true) {
  Parsed out;
  auto take = [&](std::vector<ChatEvent> events) {
    for (auto& e : events) {
      if (e.kind == ChatEvent::Kind::Reasoning) out.reasoning += e.text;
      if (e.kind == ChatEvent::Kind::Content) out.content += e.text;
      if (e.kind == ChatEvent::Kind::ToolCall) out.calls += e.name + "(" + e.text + ")";
      if (e.kind == ChatEvent::Kind::End) out.end_event = true;
      out.events.push_back(std::move(e));
    }
  };
  for (int32_t id : ids) {
    if (p.done()) break;
    take(p.push(id));
  }
  if (finish) take(p.finish());
  return out;
}

std::unique_ptr<ChatFormat> harmony() { return make_harmony_format(harmony_tokenizer(), model_stops()); }

Parsed parse_text(const std::string& reply, std::unique_ptr<ChatOutputParser>* keep = nullptr) {
  static auto format = harmony();
  auto p = format->make_parser({});
  Parsed out = parse(harmony_tokenizer().encode(reply), *p);
  if (keep) *keep = std::move(p);
  return out;
}

TEST(HarmonyParser, AnalysisThenFinal) {
  std::unique_ptr<ChatOutputParser> p;
  Parsed r = parse_text(
      "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
      &p);
  EXPECT_EQ(r.reasoning, "User asks 2+2. Answer 4.");
  EXPECT_EQ(r.content, "2 + 2 = 4.");
  EXPECT_TRUE(r.end_event);
  EXPECT_TRUE(p->done());
  EXPECT_EQ(p->finish_reason(), FinishReason::Stop);
  EXPECT_EQ(p->reply().role, "assistant");
  EXPECT_EQ(p->reply().content, "2 + 2 = 4.");
  EXPECT_EQ(p->reply().reasoning, "User asks 2+2. Answer 4.");
  // Every reasoning event comes before every content event, and End is last.
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back().kind, ChatEvent::Kind::End);
  EXPECT_EQ(r.events.front().kind, ChatEvent::Kind::Reasoning);
}

TEST(HarmonyParser, EndAfterAnalysisIsNotAStop) {
  auto p = harmony()->make_parser({});
  for (int32_t id : harmony_tokenizer().encode("<|channel|>analysis<|message|>thinking<|end|>")) p->push(id);
  EXPECT_FALSE(p->done());
  auto stops = harmony()->stop_tokens();
  EXPECT_EQ(std::count(stops.begin(), stops.end(), id_of("<|end|>")), 0);
}

TEST(HarmonyParser, StraightToFinal) {
  Parsed r = parse_text("<|channel|>final<|message|>Hello there!<|return|>");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hello there!");
  EXPECT_TRUE(r.end_event);
}

TEST(HarmonyParser, NoHeaderAtAllIsAnswerText) {
  Parsed r = parse_text("Hello<|return|>");
  EXPECT_EQ(r.content, "Hello");
  // A long run of text with no <|message|> is answer text too, and streams.
  std::unique_ptr<ChatOutputParser> p;
  Parsed long_run = parse_text(std::string(300, 'x'), &p);
  EXPECT_EQ(long_run.content, std::string(300, 'x'));
  EXPECT_FALSE(p->done());
}

TEST(HarmonyParser, CallStopsWithAToolCall) {
  std::unique_ptr<ChatOutputParser> p;
  Parsed r = parse_text(
      "<|channel|>analysis<|message|>Need weather.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
      "{\"city\":\"Paris\"}<|call|>",
      &p);
  EXPECT_EQ(r.reasoning, "Need weather.");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.calls, "get_weather({\"city\":\"Paris\"})");
  EXPECT_EQ(p->finish_reason(), FinishReason::ToolCalls);
  ASSERT_EQ(p->reply().tool_calls.size(), 1u);
  EXPECT_EQ(p->reply().tool_calls[0].name, "get_weather");
  EXPECT_EQ(p->reply().tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  // The recipient may also come after the channel.
  Parsed after = parse_text("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>");
  EXPECT_EQ(after.calls, "f({})");
}

TEST(HarmonyParser, UnknownChannelIsAnswerText) {
  Parsed r = parse_text("<|channel|>scratchpad<|message|>odd<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "oddok");
  Parsed commentary = parse_text("<|channel|>commentary<|message|>Checking.<|end|>");
  EXPECT_EQ(commentary.content, "Checking.");
}

TEST(HarmonyParser, StopsWhenTheModelStartsAnotherAuthorsTurn) {
  std::unique_ptr<ChatOutputParser> p;
  Parsed r = parse_text("<|channel|>final<|message|>Hi<|end|><|start|>user<|message|>more<|end|>", &p);
  EXPECT_EQ(r.content, "Hi");
  EXPECT_TRUE(p->done());
}

TEST(HarmonyParser, OtherModelStopTokensEndTheReply) {
  std::unique_ptr<ChatOutputParser> p;
  Parsed r = parse_text("<|channel|>final<|message|>Hi<|endoftext|>never", &p);
  EXPECT_EQ(r.content, "Hi");
  EXPECT_EQ(p->finish_reason(), FinishReason::Stop);
}

TEST(HarmonyParser, TextSplitAcrossTokensComesOutWhole) {
  // Feed the reply one byte token at a time: headers and multi-byte
  // characters arrive split, events must still carry whole characters.
  const Tokenizer& t = harmony_tokenizer();
  const std::string analysis = "café 😀 ok", final_text = "Grüße — 你好";
  std::vector<int32_t> ids;
  auto bytes = [&](const std::string& s) {
    for (char c : s) {
      int32_t id = t.token_id(std::string(1, c));
      ASSERT_GE(id, 0);
      ids.push_back(id);
    }
  };
  ids.push_back(id_of("<|channel|>"));
  bytes("analysis");
  ids.push_back(id_of("<|message|>"));
  bytes(analysis);
  ids.push_back(id_of("<|end|>"));
  ids.push_back(id_of("<|start|>"));
  bytes("assistant");
  ids.push_back(id_of("<|channel|>"));
  bytes("final");
  ids.push_back(id_of("<|message|>"));
  bytes(final_text);
  ids.push_back(id_of("<|return|>"));
  auto p = harmony()->make_parser({});
  Parsed r = parse(ids, *p);
  EXPECT_EQ(r.reasoning, analysis);
  EXPECT_EQ(r.content, final_text);
  for (const auto& e : r.events) EXPECT_EQ(e.text.find("\xEF\xBF\xBD"), std::string::npos) << e.text;
}

TEST(HarmonyParser, FinishFlushesAReplyCutByTheTokenLimit) {
  const Tokenizer& t = harmony_tokenizer();
  std::vector<int32_t> ids = t.encode("<|channel|>analysis<|message|>half a thou");
  ids.push_back(t.token_id("\xC3"));  // first byte of "é": held back until finish()
  auto p = harmony()->make_parser({});
  Parsed r = parse(ids, *p);
  EXPECT_FALSE(p->done());
  EXPECT_FALSE(r.end_event);
  EXPECT_EQ(r.reasoning, "half a thou\xEF\xBF\xBD");
  // An unfinished tool call is not reported.
  auto q = harmony()->make_parser({});
  Parsed call = parse(t.encode("<|start|>assistant to=functions.f<|channel|>commentary<|message|>{\"a\":"), *q);
  EXPECT_EQ(call.calls, "");
  EXPECT_TRUE(q->reply().tool_calls.empty());
}

TEST(HarmonyParser, GarbageNeverThrowsAndStaysValidText) {
  const Tokenizer& t = harmony_tokenizer();
  auto format = harmony();
  std::mt19937 rng(7);
  std::vector<int32_t> specials;
  for (const char* s : kHarmonyAddedTokens) specials.push_back(id_of(s));
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> ids;
    const int n = static_cast<int>(rng() % 64);
    for (int i = 0; i < n; ++i) {
      // Mostly specials (structure in every order), some text, a few ids beyond the vocabulary.
      switch (rng() % 4) {
        case 0: case 1: ids.push_back(specials[rng() % specials.size()]); break;
        case 2: ids.push_back(static_cast<int32_t>(rng() % t.vocab_size())); break;
        default: ids.push_back(static_cast<int32_t>(rng() % 100) - 50 + (rng() % 2 ? t.vocab_size() : 0)); break;
      }
    }
    auto p = format->make_parser({});
    Parsed r;
    ASSERT_NO_THROW(r = parse(ids, *p)) << round;
    EXPECT_EQ(r.end_event, p->done());
    for (const std::string* s : {&p->reply().content, &p->reply().reasoning})
      EXPECT_NO_THROW(t.encode(*s, {.allow_special = false})) << "invalid UTF-8 in round " << round;
    if (p->done()) {
      EXPECT_TRUE(p->push(specials[0]).empty());  // ignored after the end
    }
  }
}

// ---- choosing a format -----------------------------------------------------

TEST(ChatFormat, ChosenFromArchitectureAndTokenizer) {
  EXPECT_EQ(make_chat_format("gpt_oss", harmony_tokenizer(), {})->name(), "harmony");
  EXPECT_EQ(make_chat_format("qwen3_moe", qwen3_tokenizer(), {})->name(), "qwen3-chatml");
  // A tokenizer with harmony's tokens and no ChatML ones speaks harmony whatever the architecture.
  EXPECT_EQ(make_chat_format("qwen3_moe", harmony_tokenizer(), {})->name(), "harmony");
  EXPECT_THROW(make_chat_format("gpt_oss", qwen3_tokenizer(), {}), Error);  // names the missing token
  testing::expect_error([] { make_chat_format("dbrx", testing::tokenizer_without_added_tokens(), {}); },
                        {"no chat format for architecture 'dbrx'"});
}

TEST(ChatFormat, HarmonyStopTokensAreReturnCallAndTheModelsButNeverEnd) {
  std::vector<int32_t> stops_in = model_stops();
  stops_in.push_back(id_of("<|end|>"));  // a config listing <|end|> must not cut replies after the analysis
  auto format = make_harmony_format(harmony_tokenizer(), stops_in);
  EXPECT_EQ(format->stop_tokens(), (std::vector<int32_t>{id_of("<|return|>"), id_of("<|call|>"), id_of("<|endoftext|>")}));
}

TEST(ChatFormat, RenderThroughTheInterfaceEqualsTheFunction) {
  auto format = harmony();
  std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(format->render(messages, on_date("high")), render_harmony(messages, on_date("high")));
}

}  // namespace
}  // namespace tern
