#pragma once
// Chat formats. Qwen3 uses ChatML:
//   <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
// Earlier assistant turns are rendered without their <think>…</think> block,
// as Qwen3's own template does; with thinking off the generation prompt ends
// with an empty "<think>\n\n</think>\n\n" block.
#include <string>
#include <vector>

namespace tern {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct ChatFormatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;
};

std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options = {});
// Removes a leading <think>…</think> block (and following whitespace).
std::string strip_thinking(const std::string& content);

}  // namespace tern
