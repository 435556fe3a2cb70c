#include "tern/runtime/chat_template.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"

namespace tern {
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

}  // namespace
}  // namespace tern
