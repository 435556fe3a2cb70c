#pragma once
// Chat formats whose replies are plain text ended by the eos token, no
// reasoning and no tools: Mistral's [INST] (Mixtral) and Tulu's (OLMoE).
//
// Mistral's [INST] chat format (Mixtral-8x7B/8x22B-Instruct), rendered as
// Mixtral-8x7B-Instruct-v0.1's Hugging Face chat template does:
//   <s>[INST] user [/INST]assistant</s>[INST] user [/INST]
// Roles alternate user/assistant, starting with user. The template has no
// system role; as Mistral's later templates do, a leading system message is
// put before the first user message, separated by a blank line
// ("[INST] system\n\nuser [/INST]"). There are no tools. The model replies
// with plain text ended by </s>.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/runtime/chat_format.h"

namespace tern {

// Throws tern::Error naming the message on a conversation the template
// refuses (roles that do not alternate, a role other than system first /
// user / assistant, tools offered).
std::string render_mistral_instruct(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {});

// The ChatFormat for Mixtral's instruct models; stops on </s> plus `model_stops`.
std::unique_ptr<ChatFormat> make_mistral_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

// Tulu's chat format (OLMoE-1B-7B-Instruct), as its model card renders it:
//   <|endoftext|><|user|>\nuser\n<|assistant|>\nassistant<|endoftext|>\n<|user|>\n...<|assistant|>\n
// (<|system|>\n... likewise); <|user|> and friends are plain text, not
// special tokens. Throws on another role or tools.
std::string render_tulu(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {});
// The ChatFormat for OLMoE's instruct models; stops on <|endoftext|> plus `model_stops`.
std::unique_ptr<ChatFormat> make_tulu_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops);

}  // namespace tern
