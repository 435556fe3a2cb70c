#include "tern/runtime/chat_format.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/runtime/chat_template.h"
#include "tern/runtime/deepseek_chat.h"
#include "tern/runtime/gemma_chat.h"
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
  if (architecture == "gemma4" || architecture == "gemma4_text") {
    // The large models' template (26B-A4B, 31B) closes an empty thought block
    // after <|turn>model\n when thinking is off; the small ones' does not.
    // (A Jinja literal writes the newline as \n; a raw newline is taken too.)
    const bool small = !hf_template.empty() && hf_template.find("<|channel>thought\\n<channel|>") == std::string_view::npos &&
                       hf_template.find("<|channel>thought\n<channel|>") == std::string_view::npos;
    return make_gemma4_format(tokenizer, model_stops, small ? GemmaFlavor::Small : GemmaFlavor::Large);
  }
  fail("no chat format for architecture '{}': its tokenizer has neither ChatML (<|im_start|>, <|im_end|>) nor "
       "harmony (<|start|>, <|channel|>, <|message|>) tokens; use `tern generate` for raw completion",
       architecture);
}

size_t tokens_shared_with_next_turn(const ChatFormat& format, const Tokenizer& tokenizer,
                                    std::vector<ChatMessage> messages, ChatFormatOptions options,
                                    std::span<const int32_t> prompt) {
  messages.push_back({"assistant", "X"});
  options.add_generation_prompt = false;
  const std::vector<int32_t> next = tokenizer.encode(format.render(messages, options));
  return static_cast<size_t>(std::mismatch(prompt.begin(), prompt.end(), next.begin(), next.end()).first -
                             prompt.begin());
}

}  // namespace tern
