#pragma once
// GLM-4.5's chat format (GLM-4.5, GLM-4.5-Air, GLM-4.6; model_type
// glm4_moe), rendered exactly as its Hugging Face chat template renders it
// with transformers' apply_chat_template (src/tern/tokenizer/glm45_chat_template.h
// holds the text and where it came from):
//   [gMASK]<sop><|system|>\nSYSTEM<|user|>\nU<|assistant|>\n<think></think>\nA<|user|>\nU<|assistant|>
// No end-of-turn markers: the next turn's token ends a turn. With tools, a
// "# Tools" system block lists each tool as its |tojson (Python's
// json.dumps, ensure_ascii False, keys in the client's order) right after
// [gMASK]<sop>, before any system message. An assistant turn is
// "<|assistant|>\n<think>REASONING</think>" for assistant messages after the
// last user message that have reasoning, "<|assistant|>\n<think></think>"
// otherwise (earlier turns' reasoning is dropped), then "\n" + content
// stripped (when not empty), then each tool call as
//   \n<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
// (V a string as it is, anything else as its |tojson). Tool results:
//   <|observation|>\n<tool_response>\nOUT\n</tool_response>\n<tool_response>\n...
// (one <|observation|> per run of tool messages). The generation prompt is
// <|assistant|>; with enable_thinking false, user turns that do not already
// end with "/nothink" get "/nothink" appended and the generation prompt is
// "<|assistant|>\n<think></think>". The model replies
// "\n<think>REASONING</think>\nANSWER" (or tool calls) and ends with
// <|user|>, <|observation|> (after tool calls) or <|endoftext|>.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Roles: system (anywhere, each its own <|system|> block; "developer" is
// taken as system), user, assistant, tool. The template's inputs from Tern's
// messages: `reasoning` is reasoning_content when not empty; when empty, the
// template's own split applies (a <think>…</think> in the content is the
// reasoning, the text after the last </think> the content). A tool call's
// `arguments` must be a JSON object (the template iterates its items);
// throws tern::Error otherwise, on a tool whose `json`/`parameters` does not
// parse, and on another role.
std::string render_glm45(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {});

// The GLM-4.5 ChatFormat ("glm-4.5"). The tokenizer must have [gMASK],
// <sop>, <|system|>, <|user|>, <|assistant|> and <|observation|>. Stops on
// <|endoftext|>, <|user|> and <|observation|> (those it has) plus
// `model_stops`. Its parser gives a leading <think>…</think> as reasoning
// and the rest as content (both with the whitespace around them dropped, as
// the template strips them), and each well-formed
// "<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>"
// (whitespace between the parts ignored) as a tool call whose arguments are
// the JSON object {K: V, ...}: V kept as a string where the offered tool's
// parameters declare K a string (or V is not JSON), else V parsed as JSON,
// as vLLM's glm45 tool parser does. A malformed or unterminated call stays
// answer text, markup included. Special tokens other than the stops
// ([gMASK], <sop>, ...) are dropped.
std::unique_ptr<ChatFormat> make_glm45_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

}  // namespace tern
