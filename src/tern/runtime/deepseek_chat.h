#pragma once
// DeepSeek-V3's chat format, rendered exactly as the Hugging Face chat
// template of deepseek-ai/DeepSeek-V3 renders it
// (src/tern/tokenizer/deepseek_v3_chat_template.h holds its text):
//   <｜begin▁of▁sentence｜>SYSTEM<｜User｜>U<｜Assistant｜>A<｜end▁of▁sentence｜><｜User｜>U<｜Assistant｜>
// Every system message goes, in order and joined by "\n\n", right after the
// bos, wherever it stands in the conversation. User turns have no end
// marker; an assistant turn is closed by <｜end▁of▁sentence｜>. Tool calls:
//   <｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//   \n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>   (each later call)
// and tool outputs:
//   <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>OUT<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>...<｜tool▁outputs▁end｜>
// with the template's quirks kept, since Hugging Face (and servers using its
// template) render them so: only the conversation's first tool call opens
// with <｜Assistant｜><｜tool▁calls▁begin｜> (its flag is never reset; later
// calls, in any message, start with "\n<｜tool▁call▁begin｜>"), a message's
// calls are closed by <｜tool▁calls▁end｜><｜end▁of▁sentence｜> after every
// call but the conversation's first (so a lone first call is never closed),
// only the conversation's first tool output opens <｜tool▁outputs▁begin｜>,
// an assistant answer after tool outputs is "<｜tool▁outputs▁end｜>A<｜end▁of▁sentence｜>"
// (no <｜Assistant｜>), and a conversation ending in tool outputs ends with
// <｜tool▁outputs▁end｜> and gets no generation prompt. The generation prompt
// is <｜Assistant｜>; the template has no reasoning (V3 has no <think>) and
// lists no tool definitions. The model replies "answer<｜end▁of▁sentence｜>",
// or with a tool-calls block (possibly after some text).
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Roles: system (anywhere; "developer" is taken as system: the template
// ignores roles it does not know, Tern's formats treat developer as system),
// user, assistant, tool. An assistant message with tool calls and no content
// is the template's content-none branch; one without tool calls renders its
// content (even empty). Where the template cannot express a message, Tern
// departs from it: an assistant message with both text and tool calls (the
// template would render the text and drop the calls) renders the text where
// the calls' <｜Assistant｜> opener puts it — "<｜Assistant｜>TEXT<｜tool▁calls▁begin｜>…",
// as DeepSeek's later V3-0324 template does — or right before the calls when
// there is no opener. A message's `reasoning` is not rendered (the template
// has none). `options.tools` are not rendered either: the template does not
// list tools (apply_chat_template's tools argument is unused by it), so the
// prompt is the same with or without them; the parser still recognises the
// model's tool calls. Throws tern::Error on another role.
//
// DeepSeek-R1 (DeepseekFlavor::R1: also deepseek_v3, told apart by its
// tokenizer's <think> and </think> tokens) renders as R1's template
// (deepseek_r1_chat_template.h, its February 2025 revision) does: the
// generation prompt is <｜Assistant｜><think>\n; an assistant answer keeps
// only what follows its last </think> (not after tool outputs); a message's
// tool calls are always closed by <｜tool▁calls▁end｜><｜end▁of▁sentence｜>
// and its text is rendered only beside the conversation's first call;
// consecutive tool outputs have no newline between them. Its parser reads
// the reply as reasoning up to </think> (all of it if there is none, as
// vLLM's deepseek_r1 reasoning parser does), then as V3's answer, the blank
// lines after </think> dropped. R1-0528 and the R1 distills' templates
// differ in details not followed here.
enum class DeepseekFlavor { V3, R1 };
std::string render_deepseek_v3(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {},
                               DeepseekFlavor flavor = DeepseekFlavor::V3);

// The DeepSeek-V3 ChatFormat ("deepseek-v3"; "deepseek-r1" for R1's tokenizer). The tokenizer must have
// <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>, <｜User｜> and
// <｜Assistant｜>. Stops on <｜end▁of▁sentence｜> plus `model_stops`. Its
// parser gives the text as content and each well-formed
// "<｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>"
// (ARGS a JSON object, kept as written) as a tool call (finish reason
// ToolCalls at the stop), inside <｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>
// or not; a malformed or unterminated one stays answer text, markup included.
// Special tokens other than the stops (<|EOT|>, <｜▁pad▁｜>, ...) are dropped.
std::unique_ptr<ChatFormat> make_deepseek_v3_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

}  // namespace tern
