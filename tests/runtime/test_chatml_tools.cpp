// Qwen3 ChatML with tools: rendering pinned to Qwen3's Hugging Face chat
// template, and the output parser's <tool_call> handling. Every expected
// prompt below was produced by rendering the real template
// (src/tern/tokenizer/qwen3_chat_template.h, the same text as llama.cpp's
// models/templates/Qwen-Qwen3-0.6B.jinja) with jinja2 3.1.6 as transformers'
// apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, tojson = json.dumps(ensure_ascii=False)), then pasted here
// (split into lines, the weather tool's JSON line named kWeatherToolLine).
// Plain ChatML is in test_chat_template.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/chat_template.h"
#include "tern/tokenizer/tokenizer.h"
#include "support/tokenizers.h"

namespace tern {
namespace {

// tools[i] as a client sends them (the server keeps the text, key order included).
const char* const kWeatherToolJson =
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Current weather in a city, "
    "in °C.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":"
    "\"e.g. \\\"Paris\\\" or São Paulo/BR\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7,"
    "\"default\":1.0}},\"required\":[\"city\"]}}}";
// The weather tool as the template's |tojson writes it (Python's json.dumps).
const std::string kWeatherToolLine =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather in a "
    "city, in °C.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
    "\"description\": \"e.g. \\\"Paris\\\" or São Paulo/BR\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": 7, \"default\": 1.0}}, \"required\": [\"city\"]}}}";
const char* const kClockToolJson =
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}}";

ToolDefinition weather_tool() { return {"get_weather", "", "", kWeatherToolJson}; }
ToolDefinition clock_tool() { return {"get_time", "", "", kClockToolJson}; }

ChatMessage tool_result(std::string content) { return {"tool", std::move(content)}; }

// ---- rendering -----------------------------------------------------------

// The tool list is the whole system message.
TEST(ChatmlToolsRender, OneToolWithoutASystemMessage) {
  const std::vector<ChatMessage> messages = {{"user", "Weather in Paris?"}};
  EXPECT_EQ(render_chatml(messages, {.tools = {weather_tool()}}),
            "<|im_start|>system\n"
            "# Tools\n"
            "\n"
            "You may call one or more functions to assist with the user query.\n"
            "\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n"
            + kWeatherToolLine + "\n"
            "</tools>\n"
            "\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            "<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "Weather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// The system message comes first, then a blank line, then the tools.
TEST(ChatmlToolsRender, TwoToolsAfterTheSystemMessage) {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_chatml(messages, {.tools = {weather_tool(), clock_tool()}}),
            "<|im_start|>system\n"
            "Be brief.\n"
            "\n"
            "# Tools\n"
            "\n"
            "You may call one or more functions to assist with the user query.\n"
            "\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n"
            + kWeatherToolLine + "\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": "
            "\"object\", \"properties\": {}}}}\n"
            "</tools>\n"
            "\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            "<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "Hi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// A step of the current turn keeps its reasoning; its calls follow it one a line;
// consecutive tool results make one user turn.
TEST(ChatmlToolsRender, CallsAndGroupedToolResponses) {
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."},
      {"user", "Weather in Paris and London?"},
      {"assistant", "", "\nI should check both cities.\n",
       {{"get_weather", R"({"city": "Paris"})"}, {"get_weather", R"({"city":"London"})"}}},
      tool_result("18°C"),
      tool_result("15°C"),
  };
  EXPECT_EQ(render_chatml(messages, {.tools = {weather_tool()}}),
            "<|im_start|>system\n"
            "Be brief.\n"
            "\n"
            "# Tools\n"
            "\n"
            "You may call one or more functions to assist with the user query.\n"
            "\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n"
            + kWeatherToolLine + "\n"
            "</tools>\n"
            "\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            "<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "Weather in Paris and London?<|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "I should check both cities.\n"
            "</think>\n"
            "\n"
            "<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call>\n"
            "<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"London\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "<tool_response>\n"
            "18°C\n"
            "</tool_response>\n"
            "<tool_response>\n"
            "15°C\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

// Before the last user query: no <think> block; content, then a newline, then the call.
TEST(ChatmlToolsRender, EarlierTurnsWithCallsLoseTheirThinking) {
  const std::vector<ChatMessage> messages = {
      {"user", "Weather in Paris?"},
      {"assistant", "<think>\nLook it up.\n</think>\n\nLet me check.", "", {{"get_weather", R"({"city": "Paris"})"}}},
      tool_result("18°C"),
      {"assistant", "It is 18°C."},
      {"user", "Thanks!"},
  };
  EXPECT_EQ(render_chatml(messages, {.enable_thinking = false}),
            "<|im_start|>user\n"
            "Weather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n"
            "Let me check.\n"
            "<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "<tool_response>\n"
            "18°C\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n"
            "It is 18°C.<|im_end|>\n"
            "<|im_start|>user\n"
            "Thanks!<|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "\n"
            "</think>\n"
            "\n");
}

// The template gives the final assistant message after the last query a <think>
// block, empty when it has no reasoning.
TEST(ChatmlToolsRender, LastAssistantMessageAfterTheQueryGetsAThinkBlock) {
  const std::vector<ChatMessage> messages = {{"user", "a"}, {"assistant", "b"}};
  EXPECT_EQ(render_chatml(messages, {.add_generation_prompt = false}),
            "<|im_start|>user\n"
            "a<|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "\n"
            "</think>\n"
            "\n"
            "b<|im_end|>\n");
}

// A user message that is a <tool_response> block does not start a new turn:
// the assistant steps before it keep their reasoning.
TEST(ChatmlToolsRender, UserToolResponsesAreNotQueries) {
  const std::vector<ChatMessage> messages = {
      {"user", "q"},
      {"assistant", "<think>\nhmm\n</think>\n\n", "", {{"f", "{}"}}},
      {"user", "<tool_response>\nx\n</tool_response>"},
      {"assistant", "done"},
      {"user", "<tool_response>\ny\n</tool_response>"},
  };
  EXPECT_EQ(render_chatml(messages, {}),
            "<|im_start|>user\n"
            "q<|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "hmm\n"
            "</think>\n"
            "\n"
            "<tool_call>\n"
            "{\"name\": \"f\", \"arguments\": {}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "<tool_response>\n"
            "x\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n"
            "done<|im_end|>\n"
            "<|im_start|>user\n"
            "<tool_response>\n"
            "y\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

// reasoning_content wins over a <think> block in the content (which then stays);
// without it the reasoning is the text before the first </think>, the content
// what follows the last.
TEST(ChatmlToolsRender, ReasoningAndThinkInContent) {
  const std::vector<ChatMessage> messages = {
      {"user", "q"},
      {"assistant", "<think>\nkept\n</think>\n\nanswer", "given", {{"f", "{}"}}},
      tool_result("r"),
      {"assistant", "\n<think>\n\nx\n</think>y</think>\n\nz"},
  };
  EXPECT_EQ(render_chatml(messages, {.add_generation_prompt = false}),
            "<|im_start|>user\n"
            "q<|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "given\n"
            "</think>\n"
            "\n"
            "<think>\n"
            "kept\n"
            "</think>\n"
            "\n"
            "answer\n"
            "<tool_call>\n"
            "{\"name\": \"f\", \"arguments\": {}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n"
            "<tool_response>\n"
            "r\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "x\n"
            "</think>\n"
            "\n"
            "z<|im_end|>\n");
}
TEST(ChatmlToolsRender, ToolWithoutJsonIsBuiltFromItsParts) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  const ToolDefinition parts{"get_weather", "Current weather in a city, in °C.",
                             nlohmann::ordered_json::parse(kWeatherToolJson)["function"]["parameters"].dump()};
  EXPECT_EQ(render_chatml(messages, {.tools = {parts}}), render_chatml(messages, {.tools = {weather_tool()}}));
  const ToolDefinition bare{"get_time"};
  EXPECT_NE(render_chatml(messages, {.tools = {bare}}).find(
                "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}\n</tools>"),
            std::string::npos);
}

TEST(ChatmlToolsRender, RejectsAToolWhoseJsonDoesNotParse) {
  EXPECT_THROW(render_chatml({{"user", "Hi"}}, {.tools = {{"f", "", "", "{\"type\": "}}}), Error);
  EXPECT_THROW(render_chatml({{"developer", "x"}}), Error);
}

// Expected outputs from Python: json.dumps(json.loads(input), ensure_ascii=False).
TEST(ChatmlToolsRender, PythonJsonDumpsMatchesPython) {
  const std::pair<const char*, const char*> cases[] = {
      {"1.0", "1.0"},
      {"0.5", "0.5"},
      {"1e-05", "1e-05"},
      {"0.0001", "0.0001"},
      {"1e16", "1e+16"},
      {"1e15", "1000000000000000.0"},
      {"123456789.125", "123456789.125"},
      {"-0.0", "-0.0"},
      {"2.5e-300", "2.5e-300"},
      {"1.7976931348623157e308", "1.7976931348623157e+308"},
      {"0.1", "0.1"},
      {"100", "100"},
      {"-5", "-5"},
      {"18446744073709551615", "18446744073709551615"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"1E2", "100.0"},
      {"3.14159", "3.14159"},
      {"1234567890123456789.0", "1.2345678901234568e+18"},
      {"5e-324", "5e-324"},
      {"-1.5e-07", "-1.5e-07"},
      {"12345678901234567.0", "1.2345678901234568e+16"},
      {"0.000123", "0.000123"},
      {"\"\\u0001\\u001f\\u007f/\\u00e9\\ud83d\\ude00\\\"\\\\\\b\\f\\n\\r\\t\"",
       "\"\\u0001\\u001f\x7f/é😀\\\"\\\\\\b\\f\\n\\r\\t\""},
      {"{\"b\": [], \"a\": {}, \"c\": [true, false, null]}", "{\"b\": [], \"a\": {}, \"c\": [true, false, null]}"},
      {"[1,[2,{\"x\":\"y\",\"\\u00fc\":-2.0}]]", "[1, [2, {\"x\": \"y\", \"ü\": -2.0}]]"},
      {"{\"z\":1,\"a\":2,\"m\":{\"q\":\"\\u4e2d\\u6587\"}}", "{\"z\": 1, \"a\": 2, \"m\": {\"q\": \"中文\"}}"},
  };
  for (const auto& [input, expected] : cases)
    EXPECT_EQ(python_json_dumps(nlohmann::ordered_json::parse(input)), expected) << input;
}

// ---- parsing -------------------------------------------------------------

struct ToolsReply {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  int content_events = 0;
  bool ended = false;
  FinishReason finish = FinishReason::None;
};

// Feeds `generated` (encoded with the synthetic Qwen3 tokenizer, whose
// <tool_call>/</tool_call> are single added tokens) to a ChatML parser.
ToolsReply parse_tools_reply(const std::string& generated, bool thinking = true) {
  const Tokenizer& t = testing::qwen3_tokenizer();
  auto format = make_chatml_format(t, {});
  auto parser = format->make_parser({.enable_thinking = thinking, .tools = {weather_tool()}});
  ToolsReply r;
  auto take = [&](const std::vector<ChatEvent>& events) {
    for (const auto& e : events) {
      if (e.kind == ChatEvent::Kind::Reasoning) r.reasoning += e.text;
      if (e.kind == ChatEvent::Kind::Content) {
        EXPECT_FALSE(e.text.empty());
        r.content += e.text;
        ++r.content_events;
      }
      if (e.kind == ChatEvent::Kind::ToolCall) r.calls.push_back({e.name, e.text});
      if (e.kind == ChatEvent::Kind::End) r.ended = true;
    }
  };
  const std::vector<int32_t> ids = t.encode(generated);
  if (generated.find("<tool_call>") != std::string::npos) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), t.token_id("<tool_call>")), ids.end()) << "not one token";
  }
  for (int32_t id : ids) take(parser->push(id));
  take(parser->finish());
  EXPECT_EQ(parser->reply().content, r.content);
  EXPECT_EQ(parser->reply().tool_calls.size(), r.calls.size());
  for (size_t i = 0; i < r.calls.size() && i < parser->reply().tool_calls.size(); ++i) {
    EXPECT_EQ(parser->reply().tool_calls[i].name, r.calls[i].name);
    EXPECT_EQ(parser->reply().tool_calls[i].arguments, r.calls[i].arguments);
  }
  r.finish = parser->finish_reason();
  return r;
}

TEST(ChatmlToolsParse, OneCall) {
  ToolsReply r = parse_tools_reply(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"
      "<|im_end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(r.content_events, 0);
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.finish, FinishReason::ToolCalls);
}

TEST(ChatmlToolsParse, TwoCallsWithoutWhitespaceContent) {
  ToolsReply r = parse_tools_reply(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/London\", \"a\": "
      "[1, 2.5]}}\n</tool_call>\n"
      "<|im_end|>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, R"({"zone":"Europe/London","a":[1,2.5]})");  // key order kept
  EXPECT_EQ(r.content_events, 0);
  EXPECT_EQ(r.finish, FinishReason::ToolCalls);
}

TEST(ChatmlToolsParse, TextBeforeAndBetweenCallsIsContent) {
  ToolsReply r = parse_tools_reply(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "And London.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}\n</tool_call>"
      "<|im_end|>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me check.\nAnd London.");  // the newlines before each call are markup
  EXPECT_EQ(r.finish, FinishReason::ToolCalls);
  ToolsReply after = parse_tools_reply(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nDone.\n<|im_end|>");
  ASSERT_EQ(after.calls.size(), 1u);
  EXPECT_EQ(after.content, "Done.\n");
}

TEST(ChatmlToolsParse, ThinkingThenCall) {
  ToolsReply r = parse_tools_reply(
      "<think>\nI need the weather. <tool_call> is how.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}\n</tool_cal"
      "l><|im_end|>");
  EXPECT_EQ(r.reasoning, "I need the weather. <tool_call> is how.\n");  // a call inside thinking is reasoning
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");  // arguments given as a string of JSON
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.finish, FinishReason::ToolCalls);
}

TEST(ChatmlToolsParse, MalformedCallsAreContentWithTheirMarkup) {
  const std::string bad[] = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",  // bad JSON
      "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",                    // no name
      "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",                            // name not a string
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",                     // arguments not an object
      "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>",          // nor a string of one
      "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",                                           // no arguments
      "<tool_call>\n[\"f\", {}]\n</tool_call>",                                                   // not an object
  };
  for (const std::string& text : bad) {
    ToolsReply r = parse_tools_reply("Sure.\n" + text + "<|im_end|>");
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, "Sure.\n" + text);
    EXPECT_TRUE(r.ended);
    EXPECT_EQ(r.finish, FinishReason::Stop) << text;
  }
}

TEST(ChatmlToolsParse, UnterminatedCallIsContent) {
  ToolsReply stopped =
      parse_tools_reply("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n<|im_end|>");
  EXPECT_TRUE(stopped.calls.empty());
  EXPECT_EQ(stopped.content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n");
  EXPECT_EQ(stopped.finish, FinishReason::Stop);
  ToolsReply cut = parse_tools_reply("<tool_call>\n{\"name\": \"get_wea");  // the token limit: finish()
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"get_wea");
  EXPECT_FALSE(cut.ended);
  EXPECT_EQ(cut.finish, FinishReason::None);
}

TEST(ChatmlToolsParse, GoodCallThenBadCall) {
  ToolsReply r = parse_tools_reply(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{oops}\n</tool_call><|im_end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.content, "<tool_call>\n{oops}\n</tool_call>");
  EXPECT_EQ(r.finish, FinishReason::ToolCalls);  // the reply made a call
}

TEST(ChatmlToolsParse, AnswersWithoutCallsAreUnchanged) {
  ToolsReply r = parse_tools_reply("<think>\nEasy.\n</think>\n\nHello!\n\n<|im_end|>");
  EXPECT_EQ(r.reasoning, "Easy.\n");
  EXPECT_EQ(r.content, "Hello!\n\n");  // trailing whitespace is held back, not lost
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.finish, FinishReason::Stop);
  ToolsReply stray = parse_tools_reply("a </tool_call> b<|im_end|>");  // a close without an open is text
  EXPECT_EQ(stray.content, "a </tool_call> b");
}

// Random replies built from call markup, JSON pieces and text: never a throw,
// every call reported is well formed, and a reply without calls is its text
// exactly (up to the stop, special tokens dropped): nothing half-parsed is lost.
TEST(ChatmlToolsParse, RandomRepliesFailClosed) {
  const char* const pieces[] = {
      "<tool_call>", "</tool_call>", "\n", " ", "{\"name\": \"f\", \"arguments\": {}}",
      R"({"name": "g", "arguments": "{\"a\": [1, 2.5]}"})", "{\"name\":", "\"f\"", "}", "{", "hello", "é中",
      "<think>", "</think>", "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": null}}\n</tool_call>",
      "<|im_start|>", "<|im_end|>"};
  std::mt19937 rng(11);
  int with_calls = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      const size_t k = rng() % std::size(pieces);
      if (k + 1 == std::size(pieces) && rng() % 4) continue;  // a stop now and then
      text += pieces[k];
    }
    ToolsReply r;
    ASSERT_NO_THROW(r = parse_tools_reply(text, /*thinking=*/false)) << text;
    const size_t stop = text.find("<|im_end|>");
    EXPECT_EQ(r.ended, stop != std::string::npos) << text;
    if (r.ended) {
      EXPECT_EQ(r.finish, r.calls.empty() ? FinishReason::Stop : FinishReason::ToolCalls) << text;
    }
    for (const ToolCall& call : r.calls) {
      EXPECT_TRUE(call.name == "f" || call.name == "g") << text;
      EXPECT_TRUE(nlohmann::ordered_json::parse(call.arguments).is_object()) << text;
    }
    if (r.calls.empty()) {
      std::string expected = text.substr(0, stop);
      for (size_t p; (p = expected.find("<|im_start|>")) != std::string::npos;) expected.erase(p, 12);
      EXPECT_EQ(r.content, expected) << text;
    } else {
      ++with_calls;
    }
  }
  EXPECT_GT(with_calls, 20);
}

// The parser's reply renders back as the model wrote it (up to the spacing of the JSON).
TEST(ChatmlToolsParse, ReplyRendersBackAsTheTemplateWritesIt) {
  ToolsReply r = parse_tools_reply(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_c"
      "all><|im_end|>",
      /*thinking=*/false);
  ChatMessage reply{"assistant", r.content, "", r.calls};
  EXPECT_EQ(render_chatml({{"user", "q"}, reply, tool_result("18°C"), {"user", "ok"}},
                          {.add_generation_prompt = false}),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nLet me check.\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18°C\n</tool_response><|im_end|>\n<|im_start|>user\nok<|im_end|>\n");
}

}  // namespace
}  // namespace tern
