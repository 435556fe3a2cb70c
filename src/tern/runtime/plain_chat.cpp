#include "tern/runtime/plain_chat.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

std::string render_mistral_instruct(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  if (!options.tools.empty()) fail("Mixtral's [INST] chat format has no tools; send the request without them");
  std::string system;
  size_t first = 0;
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
    system = messages[0].content;
    first = 1;
  }
  std::string out = "<s>";
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool want_user = (i - first) % 2 == 0;
    if (m.role != "user" && m.role != "assistant")
      fail("message {} has role '{}'; Mixtral's chat format takes an optional first system message, then user and "
           "assistant messages",
           i, m.role);
    if ((m.role == "user") != want_user)
      fail("message {} is '{}' but Mixtral's chat format needs roles to alternate user/assistant/user/... after the "
           "optional system message",
           i, m.role);
    if (m.role == "user") {
      out += "[INST] ";
      if (i == first && !system.empty()) out += system + "\n\n";
      out += m.content + " [/INST]";
    } else {
      if (!m.tool_calls.empty()) fail("message {} has tool calls; Mixtral's chat format has no tools", i);
      out += m.content + "</s>";
    }
  }
  if (first == messages.size() && !system.empty()) out += "[INST] " + system + " [/INST]";
  // The template has no generation prompt: the text after [/INST] is the reply.
  return out;
}

std::string render_tulu(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  if (!options.tools.empty()) fail("OLMoE's chat format has no tools; send the request without them");
  std::string out = "<|endoftext|>";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" || m.role == "developer") {
      out += "<|system|>\n" + m.content + "\n";
    } else if (m.role == "user") {
      out += "<|user|>\n" + m.content + "\n";
    } else if (m.role == "assistant") {
      if (!m.tool_calls.empty()) fail("message {} has tool calls; OLMoE's chat format has no tools", i);
      out += "<|assistant|>\n" + m.content + "<|endoftext|>\n";
    } else {
      fail("message {} has role '{}'; OLMoE's chat format takes system, user and assistant messages", i, m.role);
    }
  }
  if (options.add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

namespace {

// Plain text up to a stop token; control tokens other than the stops are dropped.
class PlainParser final : public ChatOutputParser {
 public:
  PlainParser(const Tokenizer& tokenizer, std::vector<int32_t> stops)
      : tokenizer_(tokenizer), decoder_(tokenizer), stops_(std::move(stops)) {}

  std::vector<ChatEvent> push(int32_t id) override {
    std::vector<ChatEvent> events;
    if (done()) return events;
    if (std::find(stops_.begin(), stops_.end(), id) != stops_.end()) {
      content(decoder_.flush(), events);
      finish_ = FinishReason::Stop;
      events.push_back({ChatEvent::Kind::End});
      return events;
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return events;
    content(decoder_.push(id), events);
    return events;
  }

  std::vector<ChatEvent> finish() override {
    std::vector<ChatEvent> events;
    if (!done()) content(decoder_.flush(), events);
    return events;
  }

 private:
  void content(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    reply_.content += text;
    events.push_back({ChatEvent::Kind::Content, std::move(text)});
  }

  const Tokenizer& tokenizer_;
  StreamDecoder decoder_;
  std::vector<int32_t> stops_;
};

// A format that renders with `render` and stops on `eos` (which must be in
// the vocabulary, as must `bos`) plus the model's stops.
class PlainFormat final : public ChatFormat {
 public:
  using Render = std::string (*)(std::span<const ChatMessage>, const ChatFormatOptions&);
  PlainFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops, std::string_view name, Render render,
              const char* bos, const char* eos)
      : tokenizer_(tokenizer), name_(name), render_(render) {
    for (const char* token : {bos, eos})
      if (tokenizer.token_id(token) < 0) fail("the tokenizer has no {} token, which the {} chat format uses", token, name);
    stops_.push_back(tokenizer.token_id(eos));
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
  }

  std::string_view name() const override { return name_; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return render_(messages, options);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions&) const override {
    return std::make_unique<PlainParser>(tokenizer_, stops_);
  }

 private:
  const Tokenizer& tokenizer_;
  std::string_view name_;
  Render render_;
  std::vector<int32_t> stops_;
};

}  // namespace

std::unique_ptr<ChatFormat> make_mistral_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<PlainFormat>(tokenizer, model_stops, "mistral-instruct", render_mistral_instruct, "<s>",
                                       "</s>");
}

std::unique_ptr<ChatFormat> make_tulu_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<PlainFormat>(tokenizer, model_stops, "tulu", render_tulu, "<|endoftext|>",
                                       "<|endoftext|>");
}

}  // namespace tern
