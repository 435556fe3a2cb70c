// The OpenAI request parser (every wrong field is a 400 naming it) and the
// reply assembler (stop strings end the answer, text that may begin one is
// held back, never sent and then taken back).
#include <gtest/gtest.h>

#include "support/tokenizers.h"
#include "tern/server/http_server.h"
#include "tern/server/openai_api.h"

namespace tern {
namespace {

using ojson = nlohmann::ordered_json;

SamplerOptions api_defaults() {
  SamplerOptions s;
  s.temperature = 0.6f;
  s.top_k = 20;
  return s;
}

// The ApiError a body raises (status and param), or a failure if it parses.
std::pair<int, std::string> rejection(const std::string& body, bool chat = true) {
  try {
    const ojson j = ojson::parse(body);
    if (chat) parse_chat_request(j, api_defaults());
    else parse_completion_request(j, api_defaults());
  } catch (const ApiError& e) {
    const ojson b = e.body();
    return {e.status(), b["error"]["param"].is_null() ? std::string() : b["error"]["param"].get<std::string>()};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {0, ""};
}

TEST(OpenAiRequest, ChatFieldsMapOntoTheEngine) {
  const CompletionRequest r = parse_chat_request(ojson::parse(R"({
    "model": "m", "messages": [{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
                               {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                               {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "max_completion_tokens": 7, "stop": ["END", ""], "temperature": 0, "top_p": 0.5, "seed": 9,
    "presence_penalty": 0.5, "frequency_penalty": -1, "stream": true, "stream_options": {"include_usage": true},
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
    "reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": false}})"),
                                                 api_defaults());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "Hi there");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].name, "f");
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});  // empty strings dropped
  EXPECT_TRUE(r.sampling.greedy);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 20);  // the model's default, not overridden
  EXPECT_EQ(r.sampling.seed, 9u);
  EXPECT_TRUE(r.seeded);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1.0f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  ASSERT_EQ(r.format.tools.size(), 1u);
  EXPECT_EQ(r.format.tools[0].name, "f");
  // The schema keeps the client's key order (templates render it as sent).
  EXPECT_EQ(r.format.tools[0].parameters, R"({"type":"object","properties":{"x":{"type":"integer"}}})");
  EXPECT_EQ(r.format.reasoning_effort, "low");
  EXPECT_EQ(r.format.enable_thinking, std::optional<bool>(false));
}

TEST(OpenAiRequest, ToolChoiceNoneAndNamed) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}])";
  auto parse = [&](const std::string& choice) {
    return parse_chat_request(ojson::parse(R"({"messages": [{"role": "user", "content": "x"}], )" + tools +
                                          R"(, "tool_choice": )" + choice + "}"),
                              api_defaults());
  };
  EXPECT_EQ(parse(R"("auto")").format.tools.size(), 2u);
  EXPECT_TRUE(parse(R"("none")").format.tools.empty());
  const auto named = parse(R"({"type": "function", "function": {"name": "b"}})");
  ASSERT_EQ(named.format.tools.size(), 1u);
  EXPECT_EQ(named.format.tools[0].name, "b");
  EXPECT_EQ(rejection(R"({"messages": [{"role": "user", "content": "x"}], )" + tools +
                      R"(, "tool_choice": {"type": "function", "function": {"name": "zzz"}}})")
                .second,
            "tool_choice");
}

TEST(OpenAiRequest, WrongTypesAreRejectedNamingTheField) {
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "x"}])";
  struct Case {
    std::string body;
    std::string param;
  } cases[] = {
      {R"([1, 2])", ""},
      {R"({})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0]"},
      {R"({"messages": [{"content": "x"}]})", "messages[0]"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user"}]})", "messages[0]"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", "messages[0].content[0]"},
      {"{" + ok_messages + R"(, "temperature": "hot"})", "temperature"},
      {"{" + ok_messages + R"(, "temperature": 3})", "temperature"},
      {"{" + ok_messages + R"(, "top_p": 0})", "top_p"},
      {"{" + ok_messages + R"(, "max_tokens": 0})", "max_tokens"},
      {"{" + ok_messages + R"(, "max_tokens": 1.5})", "max_tokens"},
      {"{" + ok_messages + R"(, "max_completion_tokens": -3})", "max_completion_tokens"},
      {"{" + ok_messages + R"(, "stop": 7})", "stop"},
      {"{" + ok_messages + R"(, "stop": ["a", 1]})", "stop"},
      {"{" + ok_messages + R"(, "stream": "yes"})", "stream"},
      {"{" + ok_messages + R"(, "seed": "x"})", "seed"},
      {"{" + ok_messages + R"(, "presence_penalty": 2.5})", "presence_penalty"},
      {"{" + ok_messages + R"(, "n": 2})", "n"},
      {"{" + ok_messages + R"(, "tools": {}})", "tools"},
      {"{" + ok_messages + R"(, "tools": [{"type": "function", "function": {}}]})", "tools[0]"},
      {"{" + ok_messages + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})", "tools[0]"},
      {"{" + ok_messages + R"(, "tool_choice": "always"})", "tool_choice"},
      {"{" + ok_messages + R"(, "reasoning_effort": "max"})", "reasoning_effort"},
      {"{" + ok_messages + R"(, "model": 3})", "model"},
  };
  for (const auto& c : cases) {
    const auto [status, param] = rejection(c.body);
    EXPECT_EQ(status, 400) << c.body;
    EXPECT_EQ(param, c.param) << c.body;
  }
}

TEST(OpenAiRequest, CompletionPrompts) {
  EXPECT_EQ(parse_completion_request(ojson::parse(R"({"prompt": "abc"})"), api_defaults()).prompt, "abc");
  EXPECT_EQ(parse_completion_request(ojson::parse(R"({"prompt": ["abc"]})"), api_defaults()).prompt, "abc");
  EXPECT_EQ(parse_completion_request(ojson::parse(R"({"prompt": [1, 2, 3]})"), api_defaults()).prompt_tokens,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(ojson::parse(R"({"prompt": [[4, 5]]})"), api_defaults()).prompt_tokens,
            (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(rejection(R"({})", false).second, "prompt");
  EXPECT_EQ(rejection(R"({"prompt": ""})", false).second, "prompt");
  EXPECT_EQ(rejection(R"({"prompt": [1, -2]})", false).second, "prompt");
  EXPECT_EQ(rejection(R"({"prompt": ["a", "b"]})", false).second, "prompt");
  EXPECT_EQ(rejection(R"({"prompt": {"x": 1}})", false).second, "prompt");
}

TEST(OpenAiRequest, ErrorBodyHasOpenAiShape) {
  const ApiError e(429, "busy", "requests", "", "rate_limit_exceeded");
  const ojson b = e.body();
  EXPECT_EQ(b.dump(), R"({"error":{"message":"busy","type":"requests","param":null,"code":"rate_limit_exceeded"}})");
}

// A completion's text through the assembler, token by token; returns the
// deltas' concatenation and whether it stopped early.
std::pair<std::string, bool> assemble(const std::string& text, std::vector<std::string> stops,
                                      std::vector<std::string>* pieces = nullptr) {
  const Tokenizer& tok = testing::qwen3_tokenizer();
  ReplyAssembler a(tok, nullptr, {}, std::move(stops), {});
  std::vector<ReplyDelta> out;
  bool stopped = false;
  for (int32_t id : tok.encode(text)) {
    if (!a.push(id, out)) {
      stopped = true;
      break;
    }
  }
  a.finish(out);
  std::string all;
  for (const auto& d : out) {
    all += d.content;
    if (pieces) pieces->push_back(d.content);
  }
  EXPECT_EQ(all, a.content());
  return {all, stopped};
}

TEST(ReplyAssembler, StopStringEndsTheAnswerAndIsNotSent) {
  EXPECT_EQ(assemble("Hello world. The end is here.", {"end"}), std::make_pair(std::string("Hello world. The "), true));
  EXPECT_EQ(assemble("Hello world.", {"zzz"}), std::make_pair(std::string("Hello world."), false));
  // The earliest of several stops wins.
  EXPECT_EQ(assemble("one two three four", {"four", "two"}).first, "one ");
  // A stop string spanning tokens is found.
  EXPECT_EQ(assemble("abcdefghij", {"defg"}).first, "abc");
}

TEST(ReplyAssembler, TextThatMayBeginAStopIsHeldBackNotRetracted) {
  std::vector<std::string> pieces;
  // "Hello wor" could be the start of "world!"; it is not sent until "ld?" shows it is not.
  const auto [all, stopped] = assemble("Hello world? yes", {"world!"}, &pieces);
  EXPECT_EQ(all, "Hello world? yes");
  EXPECT_FALSE(stopped);
  std::string sent;
  for (const auto& p : pieces) {
    sent += p;
    EXPECT_EQ(std::string("Hello world? yes").substr(0, sent.size()), sent);  // only ever appended
  }
}

TEST(ReplyAssembler, StopTokenEndsACompletion) {
  const Tokenizer& tok = testing::qwen3_tokenizer();
  const int32_t eos = tok.token_id("<|endoftext|>");
  ReplyAssembler a(tok, nullptr, {}, {}, {eos});
  std::vector<ReplyDelta> out;
  for (int32_t id : tok.encode("Hi")) EXPECT_TRUE(a.push(id, out));
  EXPECT_FALSE(a.push(eos, out));
  a.finish(out);
  EXPECT_EQ(a.content(), "Hi");
}

TEST(ServerHost, LoopbackOnlyWithoutKey) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("192.168.1.5"));
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("example.com"));
}

}  // namespace
}  // namespace tern
