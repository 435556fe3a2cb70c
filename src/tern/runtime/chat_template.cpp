#include "tern/runtime/chat_template.h"

#include "tern/core/error.h"

namespace tern {

std::string strip_thinking(const std::string& content) {
  auto end = content.find("</think>");
  if (end == std::string::npos) return content;
  std::string rest = content.substr(end + 8);
  size_t i = 0;
  while (i < rest.size() && (rest[i] == '\n' || rest[i] == ' ')) ++i;
  return rest.substr(i);
}

std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      fail("unsupported chat role '{}' (use system, user or assistant)", m.role);
    if (m.role == "system" && i != 0) fail("a system message must come first");
    std::string content = m.role == "assistant" ? strip_thinking(m.content) : m.content;
    out += "<|im_start|>" + m.role + "\n" + content + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tern
