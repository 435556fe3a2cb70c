#include "tern/runtime/chat_template.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"
#include "support/tokenizers.h"

namespace tern {

using testing::qwen3_tokenizer;

namespace {

TEST(ChatTemplate, RendersQwen3ChatMl) {
  std::string s = render_chatml({{"system", "Be brief."}, {"user", "Hi"}});
  EXPECT_EQ(s, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ThinkingOffAddsAnEmptyThinkBlock) {
  std::string s = render_chatml({{"user", "Hi"}}, {.add_generation_prompt = true, .enable_thinking = false});
  EXPECT_EQ(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, EarlierAssistantTurnsLoseTheirThinking) {
  std::string s = render_chatml({{"user", "a"}, {"assistant", "<think>\nhmm\n</think>\n\nb"}, {"user", "c"}},
                                {.add_generation_prompt = false});
  EXPECT_EQ(s, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n");
}

TEST(ChatTemplate, RejectsUnknownRolesAndLateSystem) {
  EXPECT_THROW(render_chatml({{"robot", "x"}}), Error);
  EXPECT_THROW(render_chatml({{"user", "x"}, {"system", "y"}}), Error);
}

struct Reply {
  std::string reasoning, content;
  bool ended = false;
};

Reply parse_reply(const std::string& generated, bool thinking = true) {
  const Tokenizer& t = qwen3_tokenizer();
  auto format = make_chatml_format(t, {});
  auto parser = format->make_parser({.add_generation_prompt = true, .enable_thinking = thinking});
  Reply r;
  auto take = [&](const std::vector<ChatEvent>& events) {
    for (const auto& e : events) {
      if (e.kind == ChatEvent::Kind::Reasoning) r.reasoning += e.text;
      if (e.kind == ChatEvent::Kind::Content) r.content += e.text;
      if (e.kind == ChatEvent::Kind::End) r.ended = true;
    }
  };
  for (int32_t id : t.encode(generated)) take(parser->push(id));
  take(parser->finish());
  EXPECT_EQ(parser->reply().content, r.content);
  return r;
}

TEST(ChatTemplate, FormatRendersLikeRenderChatmlAndStopsOnImEnd) {
  const Tokenizer& t = qwen3_tokenizer();
  auto format = make_chatml_format(t, std::vector<int32_t>{t.token_id("<|endoftext|>")});
  EXPECT_EQ(format->name(), "qwen3-chatml");
  std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(format->render(messages, {}), render_chatml(messages));
  EXPECT_EQ(format->stop_tokens(), (std::vector<int32_t>{t.token_id("<|im_end|>"), t.token_id("<|endoftext|>")}));
}

TEST(ChatTemplate, ParserSplitsThinkingFromTheAnswer) {
  Reply r = parse_reply("<think>\nThe user greets.\n</think>\n\nHello!<|im_end|>ignored");
  EXPECT_EQ(r.reasoning, "The user greets.\n");
  EXPECT_EQ(r.content, "Hello!");
  EXPECT_TRUE(r.ended);
}

TEST(ChatTemplate, ParserWithoutThinkingTakesEverythingAsTheAnswer) {
  Reply off = parse_reply("Hello <think> there<|im_end|>", /*thinking=*/false);
  EXPECT_EQ(off.reasoning, "");
  EXPECT_EQ(off.content, "Hello <think> there");
  Reply plain = parse_reply("Just an answer.");  // cut by the token limit: no end
  EXPECT_EQ(plain.content, "Just an answer.");
  EXPECT_FALSE(plain.ended);
}

// The generation prompts of the two Qwen3 template families, as their Jinja
// sources write them (Qwen3-30B-A3B's hybrid template; the Thinking-2507
// releases' and Qwen3-Next-80B-A3B-Thinking's).
constexpr const char* kHybridTemplate =
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined "
    "and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}";
constexpr const char* kInstructTemplate =
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}";
constexpr const char* kThinkingTemplate =
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}";

TEST(ChatTemplate, AnInstructReleasesTemplateHasNoThinkingSwitch) {
  const Tokenizer& t = qwen3_tokenizer();
  auto format = make_chat_format("qwen3_next", t, {}, kInstructTemplate);
  EXPECT_EQ(format->name(), "qwen3-instruct-chatml");
  const std::vector<ChatMessage> one = {{"user", "Hi"}};
  EXPECT_EQ(format->render(one, {.add_generation_prompt = true, .enable_thinking = false}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // The hybrid template's switch still adds the empty block.
  EXPECT_EQ(make_chat_format("qwen3_moe", t, {}, kHybridTemplate)->render(one, {.enable_thinking = false}),
            render_chatml(one, {.enable_thinking = false}));
}

TEST(ChatTemplate, AThinkingReleasesTemplateOpensReasoningInThePrompt) {
  const Tokenizer& t = qwen3_tokenizer();
  EXPECT_EQ(make_chat_format("qwen3_next", t, {}, kHybridTemplate)->name(), "qwen3-chatml");
  EXPECT_EQ(make_chat_format("qwen3_next", t, {})->name(), "qwen3-chatml");
  auto format = make_chat_format("qwen3_next", t, {}, kThinkingTemplate);
  EXPECT_EQ(format->name(), "qwen3-thinking-chatml");
  const std::vector<ChatMessage> turn2 = {{"user", "a"}, {"assistant", "<think>\nhmm\n</think>\n\nb"}, {"user", "c"}};
  // History as the hybrid template renders it; the prompt opens <think>
  // whatever enable_thinking says.
  for (bool thinking : {true, false})
    EXPECT_EQ(format->render(turn2, {.add_generation_prompt = true, .enable_thinking = thinking}),
              render_chatml(turn2, {.add_generation_prompt = false}) + "<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(format->render(turn2, {.add_generation_prompt = false}), render_chatml(turn2, {.add_generation_prompt = false}));
  // The reply starts inside the reasoning.
  auto parser = format->make_parser({.add_generation_prompt = true});
  std::string reasoning, content;
  for (int32_t id : t.encode("The user says c.\n</think>\n\nSure.<|im_end|>"))
    for (const auto& e : parser->push(id)) {
      if (e.kind == ChatEvent::Kind::Reasoning) reasoning += e.text;
      if (e.kind == ChatEvent::Kind::Content) content += e.text;
    }
  parser->finish();
  EXPECT_EQ(reasoning, "The user says c.\n");  // streamed as generated; the reply strips it
  EXPECT_EQ(content, "Sure.");
  EXPECT_EQ(parser->reply().reasoning, "The user says c.");
}

}  // namespace
}  // namespace tern
