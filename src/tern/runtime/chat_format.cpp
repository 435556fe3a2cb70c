#include "tern/runtime/chat_format.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/runtime/chat_template.h"
#include "tern/runtime/deepseek_chat.h"
#include "tern/runtime/glm45_chat.h"
#include "tern/runtime/harmony.h"
#include "tern/runtime/plain_chat.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

std::vector<ChatEvent> ReplyParser::push(int32_t id) {
  std::vector<ChatEvent> events;
  if (done()) return events;
  if (std::find(stops_.begin(), stops_.end(), id) != stops_.end()) {
    end_reply(events);
    finish_ = reply_.tool_calls.empty() ? FinishReason::Stop : FinishReason::ToolCalls;
    events.push_back({ChatEvent::Kind::End});
    return events;
  }
  handle(id, events);
  return events;
}

std::vector<ChatEvent> ReplyParser::finish() {
  std::vector<ChatEvent> events;
  if (!done()) end_reply(events);
  return events;
}

std::unique_ptr<ChatFormat> make_chat_format(std::string_view architecture, const Tokenizer& tokenizer,
                                             std::span<const int32_t> model_stops, std::string_view hf_template) {
  auto has = [&](const char* token) { return tokenizer.token_id(token) >= 0; };
  const bool chatml = has("<|im_start|>") && has("<|im_end|>");
  const bool harmony = has("<|start|>") && has("<|channel|>") && has("<|message|>");
  if (architecture == "gpt_oss" || (harmony && !chatml)) return make_harmony_format(tokenizer, model_stops);
  // ChatML first: fine-tunes of other architectures often add its tokens.
  // Qwen1.5/Qwen2 render it as their own templates do.
  if (chatml) {
    // The Thinking releases' templates write the generation prompt as
    // '<|im_start|>assistant\n<think>\n' (a Jinja string literal).
    // The Instruct-2507 releases' (and Qwen3-Next-80B-A3B-Instruct's) have
    // no enable_thinking switch.
    const bool thinking = hf_template.find("'<|im_start|>assistant\\n<think>\\n'") != std::string_view::npos;
    const bool instruct = !hf_template.empty() && !thinking && hf_template.find("enable_thinking") == std::string_view::npos;
    return make_chatml_format(tokenizer, model_stops,
                              architecture == "qwen2_moe" ? ChatmlFlavor::Qwen2
                              : thinking                  ? ChatmlFlavor::Qwen3Thinking
                              : instruct                  ? ChatmlFlavor::Qwen3Instruct
                                                          : ChatmlFlavor::Qwen3);
  }
  if (architecture == "mixtral") return make_mistral_format(tokenizer, model_stops);
  if (architecture == "olmoe") return make_tulu_format(tokenizer, model_stops);
  if (architecture == "deepseek_v3") return make_deepseek_v3_format(tokenizer, model_stops);
  if (architecture == "glm4_moe") return make_glm45_format(tokenizer, model_stops);
  fail("no chat format for architecture '{}': its tokenizer has neither ChatML (<|im_start|>, <|im_end|>) nor "
       "harmony (<|start|>, <|channel|>, <|message|>) tokens; use `tern generate` for raw completion",
       architecture);
}

}  // namespace tern
