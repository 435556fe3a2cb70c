#include "tern/runtime/chat_template.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"

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

namespace {

// Reply: optional "<think>" reasoning "</think>", then the answer, then a stop.
class ChatmlParser final : public ChatOutputParser {
 public:
  ChatmlParser(const Tokenizer& tokenizer, std::vector<int32_t> stops, int32_t think_open,
               int32_t think_close, bool thinking)
      : tokenizer_(tokenizer), decoder_(tokenizer), stops_(std::move(stops)), think_open_(think_open),
        think_close_(think_close), may_think_(thinking) {}

  std::vector<ChatEvent> push(int32_t id) override {
    std::vector<ChatEvent> events;
    if (done()) return events;
    if (std::find(stops_.begin(), stops_.end(), id) != stops_.end()) {
      flush(events);
      finish_ = FinishReason::Stop;
      events.push_back({ChatEvent::Kind::End});
      return events;
    }
    if (id == think_open_ && may_think_ && !thinking_) {  // only before any answer text
      thinking_ = true;
      may_think_ = false;
      skip_newlines_ = true;
      return events;
    }
    if (id == think_close_ && thinking_) {
      flush(events);
      thinking_ = false;
      while (!reply_.reasoning.empty() && reply_.reasoning.back() == '\n') reply_.reasoning.pop_back();
      skip_newlines_ = true;
      return events;
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return events;  // stray control token
    emit(decoder_.push(id), events);
    return events;
  }

  std::vector<ChatEvent> finish() override {
    std::vector<ChatEvent> events;
    if (!done()) flush(events);
    return events;
  }

 private:
  void flush(std::vector<ChatEvent>& events) { emit(decoder_.flush(), events); }

  void emit(std::string text, std::vector<ChatEvent>& events) {
    if (skip_newlines_) {  // "<think>\n" and "</think>\n\n" are markup, as Qwen3's template treats them
      size_t i = 0;
      while (i < text.size() && text[i] == '\n') ++i;
      text.erase(0, i);
      if (text.empty()) return;
      skip_newlines_ = false;
    }
    if (text.empty()) return;
    may_think_ = false;
    if (thinking_) {
      reply_.reasoning += text;
      events.push_back({ChatEvent::Kind::Reasoning, std::move(text)});
    } else {
      reply_.content += text;
      events.push_back({ChatEvent::Kind::Content, std::move(text)});
    }
  }

  const Tokenizer& tokenizer_;
  StreamDecoder decoder_;
  std::vector<int32_t> stops_;
  int32_t think_open_, think_close_;
  bool may_think_;
  bool thinking_ = false;
  bool skip_newlines_ = false;
};

class ChatmlFormat final : public ChatFormat {
 public:
  ChatmlFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) : tokenizer_(tokenizer) {
    const int32_t im_end = tokenizer.token_id("<|im_end|>");
    if (im_end < 0) fail("the tokenizer has no <|im_end|> token, which ChatML needs");
    stops_.push_back(im_end);
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
    think_open_ = tokenizer.token_id("<think>");
    think_close_ = tokenizer.token_id("</think>");
  }

  std::string_view name() const override { return "qwen3-chatml"; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return render_chatml(std::vector<ChatMessage>(messages.begin(), messages.end()), options);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions& options) const override {
    return std::make_unique<ChatmlParser>(tokenizer_, stops_, think_open_, think_close_,
                                          options.enable_thinking && think_open_ >= 0 && think_close_ >= 0);
  }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> stops_;
  int32_t think_open_ = -1, think_close_ = -1;
};

}  // namespace

std::unique_ptr<ChatFormat> make_chatml_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<ChatmlFormat>(tokenizer, model_stops);
}

}  // namespace tern
