#pragma once
// Qwen3's chat format, ChatML:
//   <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
// Earlier assistant turns are rendered without their <think>…</think> block,
// as Qwen3's own template does; with thinking off the generation prompt ends
// with an empty "<think>\n\n</think>\n\n" block. The model replies
// "<think>\n…\n</think>\n\nanswer<|im_end|>".
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Roles: system (first only), user, assistant. An assistant message's
// reasoning and tool calls are not rendered (Qwen3 drops earlier thinking).
std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options = {});
// Removes a leading <think>…</think> block (and following whitespace).
std::string strip_thinking(const std::string& content);

// The ChatFormat for Qwen3; stops on <|im_end|> plus `model_stops`. Its
// parser splits <think>…</think> into reasoning and the rest into content.
std::unique_ptr<ChatFormat> make_chatml_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

}  // namespace tern
