#pragma once
// Gemma 4's chat format (gemma-4-26B-A4B-it and the other Gemma 4 releases;
// model_type gemma4), as Google's Gemma 4 prompt format and the release's
// Hugging Face chat template render it (docs/gemma4_facts.md):
//   <bos><|turn>system\nSYSTEM<turn|>\n<|turn>user\nU<turn|>\n<|turn>model\nA<turn|>\n<|turn>model\n<|channel>thought\n<channel|>
// Each turn is <|turn>ROLE\n + its content trimmed + <turn|>\n; "assistant"
// is written "model". A first system (or developer) message is its own
// system turn; with thinking on, the system turn (added if there is none)
// opens with <|think|>\n. The generation prompt is <|turn>model\n; with
// thinking off, the large models' template (26B-A4B, 31B) follows it with an
// empty, closed thought block <|channel>thought\n<channel|>, the small ones'
// (E2B, E4B) do not. Earlier turns' reasoning is dropped (the template's
// strip_thinking). Thinking is off unless asked for (the template's
// enable_thinking defaults to false). The model replies
//   [<|channel>thought\nREASONING<channel|>]ANSWER<turn|>
// Tools (<|tool>declaration:...<tool|>, <|tool_call>call:NAME{...}<tool_call|>)
// are not implemented: a conversation with tools or tool messages is refused.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

enum class GemmaFlavor {
  Large,  // 26B-A4B, 31B: thinking off adds the empty thought block to the generation prompt
  Small,  // E2B, E4B: it does not
};

// Roles: a first system/developer message, then user and assistant (later
// system messages are system turns, as the template writes any role it is
// given). Throws tern::Error on tools, a tool message, tool calls or another
// role.
std::string render_gemma4(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {},
                          GemmaFlavor flavor = GemmaFlavor::Large);

// The Gemma 4 ChatFormat ("gemma4"). The tokenizer must have <bos>, <|turn>,
// <turn|>, <|channel> and <channel|>. Stops on <turn|>, <eos> and
// <|tool_response>, those it has, plus `model_stops`. Its parser gives
// <|channel>...<channel|> as reasoning (the channel name "thought\n" at its
// start dropped) and the rest as content; other special tokens are dropped.
std::unique_ptr<ChatFormat> make_gemma4_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops,
                                               GemmaFlavor flavor = GemmaFlavor::Large);

}  // namespace tern
