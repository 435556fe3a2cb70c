#pragma once
// OpenAI's harmony chat format (gpt-oss), rendered exactly as the Hugging
// Face chat template of openai/gpt-oss renders it (docs/gpt_oss_facts.md §6):
//   <|start|>system<|message|>You are ChatGPT, …\nKnowledge cutoff: 2024-06\n
//     Current date: D\n\nReasoning: medium\n\n# Valid channels: …<|end|>
//   <|start|>developer<|message|># Instructions\n\nS\n\n<|end|>   (a leading system/developer message;
//                                                                  tools: "# Tools\n\n## functions…" after it)
//   <|start|>user<|message|>U<|end|>
//   <|start|>assistant<|channel|>final<|message|>A<|end|>       (earlier turns: analysis dropped)
//   <|start|>assistant                                            (generation prompt)
// The model replies <|channel|>analysis<|message|>…<|end|><|start|>assistant
// <|channel|>final<|message|>…<|return|>: <|end|> closes a message, only
// <|return|> and <|call|> end the reply.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Roles: system or developer (first message only: it becomes the developer
// instructions; later ones are dropped, as the template drops them), user,
// assistant (reasoning rendered only for a tool call no final answer follows,
// or for the last message when there is no generation prompt), tool (the
// output of the previous assistant tool call). With `options.tools`, as the
// template's render_tool_namespace does: the system message ends with
// "\nCalls to these tools must go to the commentary channel: 'functions'.",
// and the developer message (present even without a system/developer
// message, then without "# Instructions") ends with "# Tools\n\n## functions\n\n
// namespace functions {\n\n// DESCRIPTION\ntype NAME = (_: {\n// PARAM DESCRIPTION\n
// param?: TYPE, // default: D,\n}) => any;\n\n} // namespace functions" ("?" unless
// required; "() => any;" without properties), each parameter's JSON Schema as
// a TypeScript type by the template's render_typescript_type (string, number,
// integer, boolean, arrays, enums, nullable, type lists, oneOf and nested
// objects, with the template's odd line breaks; anyOf and other schemas are
// "any"). A tool call's arguments are written as the template's |tojson
// writes an object (Python's json.dumps: {"city": "Paris"}), text that is not
// JSON as it is. Throws tern::Error for an unknown role or reasoning effort,
// a tool message without a preceding call, channel markup inside an
// assistant message (as the template does), or tool parameters that are not JSON.
std::string render_harmony(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options = {});

// The harmony ChatFormat. The tokenizer must have harmony's special tokens.
// Stops on <|return|>, <|call|> and `model_stops`, never on <|end|>. Its
// parser maps the analysis channel to reasoning, final (and commentary
// without a recipient, and anything it cannot place) to content, and a
// message addressed "to=functions.NAME" to a tool call.
std::unique_ptr<ChatFormat> make_harmony_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

// Python's json.dumps(text, ensure_ascii=False): the template's |tojson of a string.
std::string json_string_literal(const std::string& text);

}  // namespace tern
