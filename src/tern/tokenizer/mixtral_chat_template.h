#pragma once
// Mixtral-8x7B-Instruct-v0.1's chat template as first released in its
// tokenizer_config.json (the same string llama-cpp-python quotes as
// MIXTRAL_INSTRUCT_CHAT_TEMPLATE from that file; the model's repository
// later replaced it with one that also takes a system message). Synthetic
// Mistral-kind test models ship it, so chat formatting is exercised as with
// the real model: <s>, then "[INST] user [/INST]" and "reply</s>" turns that
// must alternate, no system role, no generation prompt.
#include <string_view>

namespace tern {

// clang-format off
inline constexpr std::string_view kMixtralChatTemplate = R"TEMPLATE({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})TEMPLATE";
// clang-format on

}  // namespace tern
