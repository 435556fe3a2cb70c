#pragma once
// Qwen3's chat format, ChatML, rendered as Qwen3's own Hugging Face chat
// template does (src/tern/tokenizer/qwen3_chat_template.h holds its text):
//   <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
// With tools, the system block lists them in <tools></tools> (each tool as
// Python's json.dumps writes it). Assistant turns before the last user query
// are rendered without their <think>…</think> block; those after it (the
// steps of a tool-calling turn) keep their reasoning. An assistant's tool
// calls follow its content as "<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>";
// consecutive tool results form one user turn of <tool_response> blocks.
// With thinking off the generation prompt ends with an empty
// "<think>\n\n</think>\n\n" block. The model replies
// "<think>\n…\n</think>\n\nanswer<|im_end|>", or with tool calls in place of
// (or after) the answer.
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Roles: system (first only), user, assistant, tool. An assistant message's
// reasoning is its `reasoning`, or else the <think>…</think> block at the start
// of its content. Throws tern::Error on another role, a late system message,
// or a tool whose `json` does not parse.
std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options = {});
// Removes a leading <think>…</think> block (and following whitespace).
std::string strip_thinking(const std::string& content);

// `value` as Python's json.dumps(value, ensure_ascii=False) writes it, which
// is what Jinja's |tojson gives in Hugging Face chat templates: ", " and ": "
// separators, keys in their order, non-ASCII as UTF-8, control characters as
// \n \r \t \b \f or \u00XX, '/' not escaped, floats as Python's repr
// (1.0, 1e-05, 1e+16). Integers beyond 64 bits (which nlohmann parses as
// floats) cannot come out as Python's exact ones.
std::string python_json_dumps(const nlohmann::ordered_json& value);
// A tool as the templates' `tool | tojson` writes it (ensure_ascii off, as
// Qwen3's and GLM-4.5's do): the object the client sent, or, when only its
// parts are known, {"type": "function", "function": {...}}.
std::string tool_template_json(const ToolDefinition& tool);

// Qwen1.5/Qwen2's ChatML (Qwen1.5-MoE-A2.7B-Chat, Qwen2-57B-A14B-Instruct),
// as their template renders it: a system message "You are a helpful
// assistant." when the conversation does not start with one, then every
// message as <|im_start|>ROLE\ncontent<|im_end|>\n; no reasoning, no tools
// (throws when tools are offered).
std::string render_qwen2_chatml(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {});

// Qwen3: the hybrid template (enable_thinking). Qwen3Thinking: the
// Thinking releases' (Qwen3-*-Thinking-2507, Qwen3-Next-80B-A3B-Thinking),
// the same rendering but the generation prompt always opens "<think>\n" and
// the reply is read as reasoning up to </think>. Qwen3Instruct: the
// Instruct-2507 releases' (Qwen3-Next-80B-A3B-Instruct), the same rendering
// without the switch (enable_thinking false adds no empty think block).
// Qwen2: Qwen1.5/Qwen2's.
enum class ChatmlFlavor { Qwen3, Qwen2, Qwen3Thinking, Qwen3Instruct };

// The ChatFormat for Qwen3 (or Qwen2: rendered by render_qwen2_chatml, its
// replies plain text); stops on <|im_end|> plus `model_stops`. Its
// parser splits <think>…</think> into reasoning and the rest into content,
// and turns each well-formed <tool_call>{"name": ..., "arguments": {...}}</tool_call>
// into a tool call (finish reason ToolCalls at the stop); a malformed or
// unterminated one stays answer text, markup included.
std::unique_ptr<ChatFormat> make_chatml_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops,
                                               ChatmlFlavor flavor = ChatmlFlavor::Qwen3);

}  // namespace tern
