#include "tern/runtime/gemma_chat.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace {

// Jinja's |trim: the whitespace at both ends.
std::string_view trimmed(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n\f\v");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n\f\v") - a + 1);
}

// The template's strip_thinking: an assistant message's text without its
// <|channel>...<channel|> parts.
std::string without_thoughts(std::string_view text) {
  std::string out;
  for (;;) {
    const size_t open = text.find("<|channel>");
    if (open == std::string_view::npos) break;
    const size_t close = text.find("<channel|>", open);
    out += text.substr(0, open);
    if (close == std::string_view::npos) return out;
    text.remove_prefix(close + 10);
  }
  out += text;
  return out;
}

}  // namespace

std::string render_gemma4(std::span<const ChatMessage> messages, const ChatFormatOptions& options,
                          GemmaFlavor flavor) {
  if (!options.tools.empty())
    fail("Gemma 4's tool format (<|tool>declaration:...) is not implemented in Tern; send the request without tools");
  const bool thinking = options.enable_thinking.value_or(false);
  std::string out = "<bos>";
  size_t first = 0;
  const bool system = !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
  if (thinking || system) {
    out += "<|turn>system\n";
    if (thinking) out += "<|think|>\n";
    if (system) {
      out += trimmed(messages[0].content);
      first = 1;
    }
    out += "<turn|>\n";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool" || !m.tool_calls.empty())
      fail("message {} is a tool {}; Gemma 4's tool format is not implemented in Tern", i,
           m.role == "tool" ? "result" : "call");
    std::string_view role = m.role;
    if (role == "assistant") role = "model";
    else if (role == "developer") role = "system";
    else if (role != "user" && role != "system")
      fail("message {} has role '{}'; Gemma 4's chat format takes system, user and assistant messages", i, m.role);
    out += "<|turn>";
    out += role;
    out += '\n';
    out += role == "model" ? std::string(trimmed(without_thoughts(m.content))) : std::string(trimmed(m.content));
    out += "<turn|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|turn>model\n";
    if (!thinking && flavor == GemmaFlavor::Large) out += "<|channel>thought\n<channel|>";
  }
  return out;
}

namespace {

// [<|channel>NAME\nREASONING<channel|>]ANSWER, then a stop.
class GemmaParser final : public ReplyParser {
 public:
  GemmaParser(const Tokenizer& tokenizer, std::vector<int32_t> stops, int32_t channel, int32_t channel_end)
      : ReplyParser(tokenizer, std::move(stops)), channel_(channel), channel_end_(channel_end) {}

 private:
  void handle(int32_t id, std::vector<ChatEvent>& events) override {
    if (id == channel_ && !in_channel_) {
      flush(events);
      in_channel_ = true;
      name_done_ = false;
      name_.clear();
      return;
    }
    if (id == channel_end_ && in_channel_) {
      flush(events);
      in_channel_ = false;
      if (!name_done_ && name_ != "thought") reasoning(std::move(name_), events);  // no channel name: all of it
      answer_started_ = false;
      return;
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return;  // stray control token
    emit(decoder_.push(id), events);
  }

  void end_reply(std::vector<ChatEvent>& events) override {
    flush(events);
    if (in_channel_ && !name_done_) reasoning(std::move(name_), events);
  }

  void flush(std::vector<ChatEvent>& events) { emit(decoder_.flush(), events); }

  void emit(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    if (in_channel_) {
      if (!name_done_) {  // the channel's name ("thought") up to the first newline
        name_ += text;
        const size_t nl = name_.find('\n');
        if (nl == std::string::npos) return;
        std::string rest = name_.substr(nl + 1);
        name_done_ = true;
        if (name_.substr(0, nl) != "thought") rest = name_;  // not a channel name: reasoning as written
        reasoning(std::move(rest), events);
        return;
      }
      reasoning(std::move(text), events);
      return;
    }
    if (!answer_started_) {  // the whitespace after a thought block is markup
      const size_t start = text.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return;
      text.erase(0, start);
      answer_started_ = true;
    }
    reply_.content += text;
    events.push_back({ChatEvent::Kind::Content, std::move(text)});
  }

  void reasoning(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    reply_.reasoning += text;
    events.push_back({ChatEvent::Kind::Reasoning, std::move(text)});
  }

  int32_t channel_, channel_end_;
  bool in_channel_ = false, name_done_ = false, answer_started_ = false;
  std::string name_;
};

class GemmaFormat final : public ChatFormat {
 public:
  GemmaFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops, GemmaFlavor flavor)
      : tokenizer_(tokenizer), flavor_(flavor) {
    for (const char* token : {"<bos>", "<|turn>", "<turn|>", "<|channel>", "<channel|>"})
      if (tokenizer.token_id(token) < 0) fail("the tokenizer has no {} token, which Gemma 4's chat format uses", token);
    channel_ = tokenizer.token_id("<|channel>");
    channel_end_ = tokenizer.token_id("<channel|>");
    for (const char* token : {"<turn|>", "<eos>", "<|tool_response>"})
      if (const int32_t id = tokenizer.token_id(token); id >= 0) stops_.push_back(id);
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
  }

  std::string_view name() const override { return "gemma4"; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return render_gemma4(messages, options, flavor_);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions&) const override {
    return std::make_unique<GemmaParser>(tokenizer_, stops_, channel_, channel_end_);
  }

 private:
  const Tokenizer& tokenizer_;
  GemmaFlavor flavor_;
  int32_t channel_ = -1, channel_end_ = -1;
  std::vector<int32_t> stops_;
};

}  // namespace

std::unique_ptr<ChatFormat> make_gemma4_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops,
                                               GemmaFlavor flavor) {
  return std::make_unique<GemmaFormat>(tokenizer, model_stops, flavor);
}

}  // namespace tern
