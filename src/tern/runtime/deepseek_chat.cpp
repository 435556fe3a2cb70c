#include "tern/runtime/deepseek_chat.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// Names of one file in the library's unity build must differ from every
// other file's: this file's helpers live in deepseek_chat.
namespace {
namespace deepseek_chat {

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out += p;
  return out;
}

// tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n```json\n' + arguments + '\n```<｜tool▁call▁end｜>'
std::string call_text(const ToolCall& call) {
  return cat({"function", kSep, call.name, "\n```json\n", call.arguments, "\n```", kCallEnd});
}

// Follows the template (src/tern/tokenizer/deepseek_v3_chat_template.h, or
// R1's deepseek_r1_chat_template.h) statement by statement; its namespace
// flags keep their names.
std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options, DeepseekFlavor flavor) {
  const bool r1 = flavor == DeepseekFlavor::R1;
  auto is_system = [](const ChatMessage& m) { return m.role == "system" || m.role == "developer"; };
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (!is_system(messages[i]) && r != "user" && r != "assistant" && r != "tool")
      fail("message {} has role '{}'; DeepSeek-V3's chat format takes system, user, assistant and tool messages", i,
           r);
  }
  // The system prompt: every system message's content, joined by "\n\n".
  std::string out(kBos);
  bool is_first_sp = true;
  for (const ChatMessage& m : messages) {
    if (!is_system(m)) continue;
    if (!is_first_sp) out += "\n\n";
    out += m.content;
    is_first_sp = false;
  }
  bool is_first = false;  // a tool call has been rendered (never reset, as in the template)
  bool is_tool = false;   // the last messages were tool outputs
  bool is_output_first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      is_tool = false;
      out += cat({kUser, m.content});
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      // The template's "content is none" branch. Text alongside the calls is
      // Tern's addition (see the header): the template has no place for it.
      is_tool = false;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if (!is_first) {
          out += cat({kAssistant, m.content, kCallsBegin, kCallBegin, call_text(m.tool_calls[k])});
          is_first = true;
        } else if (r1) {  // R1 renders a message's text with the conversation's first call only
          out += cat({"\n", kCallBegin, call_text(m.tool_calls[k])});
        } else {
          if (k == 0) out += m.content;
          out += cat({"\n", kCallBegin, call_text(m.tool_calls[k]), kCallsEnd, kEos});
        }
      }
      if (r1) out += cat({kCallsEnd, kEos});  // R1 closes every message's calls
    } else if (m.role == "assistant") {
      if (is_tool) {
        out += cat({kOutputsEnd, m.content, kEos});
        is_tool = false;
      } else if (r1) {  // R1 keeps what follows the last </think>
        const size_t cut = m.content.rfind(kThinkEnd);
        out += cat({kAssistant, cut == std::string::npos ? std::string_view(m.content)
                                                           : std::string_view(m.content).substr(cut + kThinkEnd.size()),
                    kEos});
      } else {
        out += cat({kAssistant, m.content, kEos});
      }
    } else if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += cat({kOutputsBegin, kOutputBegin, m.content, kOutputEnd});
        is_output_first = false;
      } else {
        out += cat({r1 ? "" : "\n", kOutputBegin, m.content, kOutputEnd});
      }
    }
  }
  if (is_tool) out += kOutputsEnd;
  if (options.add_generation_prompt && !is_tool) out += r1 ? cat({kAssistant, kThink, "\n"}) : std::string(kAssistant);
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A call's text: TYPE before <｜tool▁sep｜>, "NAME\n```json\nARGS\n```" after
// it. nullopt unless TYPE is "function", NAME is not empty and ARGS is a JSON
// object (kept as written, without the whitespace around it).
std::optional<ToolCall> parse_call(std::string_view type, std::string_view body) {
  if (trim(type) != "function") return std::nullopt;
  const size_t newline = body.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  const std::string_view name = trim(body.substr(0, newline));
  std::string_view fence = trim(body.substr(newline + 1));
  if (name.empty() || !fence.starts_with("```") || fence.size() < 6 || !fence.ends_with("```")) return std::nullopt;
  fence.remove_prefix(3);
  fence.remove_suffix(3);
  if (fence.starts_with("json")) fence.remove_prefix(4);
  const std::string arguments(trim(fence));
  try {
    check_json_depth(arguments, "tool call arguments");
    const auto j = nlohmann::json::parse(arguments, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
  } catch (const std::exception&) {  // too deep
    return std::nullopt;
  }
  return ToolCall{std::string(name), arguments};
}

// Reply: answer text, then (or instead) <｜tool▁calls▁begin｜>, calls
// separated by newlines, <｜tool▁calls▁end｜>, then a stop. R1: reasoning
// first (its prompt opened <think>), up to </think>.
class DeepseekParser final : public ReplyParser {
 public:
  struct Ids {
    int32_t calls_begin = -1, calls_end = -1, call_begin = -1, call_end = -1, sep = -1;
    int32_t think = -1, think_end = -1;  // R1 only
  };

  DeepseekParser(const Tokenizer& tokenizer, std::vector<int32_t> stops, Ids ids)
      : ReplyParser(tokenizer, std::move(stops)), ids_(ids),
        state_(ids.think_end >= 0 ? State::Reasoning : State::Text) {}

  void handle(int32_t id, std::vector<ChatEvent>& events) override {
    if (id >= 0 && state_ == State::Reasoning) {
      if (id == ids_.think && reply_.reasoning.empty()) return;  // a repeated opener
      if (id == ids_.think_end) {
        flush(events);
        state_ = State::Text;
        answer_started_ = false;
        return;
      }
    }
    if (id >= 0) {
      if (state_ == State::Text && id == ids_.calls_begin) {
        flush(events);
        state_ = State::Calls;
        in_block_ = true;
        return;
      }
      if ((state_ == State::Text || state_ == State::Calls) && id == ids_.call_begin) {
        flush(events);
        state_ = State::CallType;
        return;
      }
      if (state_ == State::Calls && id == ids_.calls_end) {
        flush(events);
        state_ = State::Text;
        in_block_ = false;
        return;
      }
      if (state_ == State::CallType && id == ids_.sep) {
        flush(events);
        state_ = State::CallBody;
        return;
      }
      if ((state_ == State::CallType || state_ == State::CallBody) && id == ids_.call_end) {
        flush(events);
        close_call(/*closed=*/true, events);
        return;
      }
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return;  // stray control token
    emit(decoder_.push(id), events);
  }

 private:
  enum class State {
    Reasoning,  // R1: before </think>
    Text,      // answer text
    Calls,     // inside <｜tool▁calls▁begin｜>, between calls
    CallType,  // after <｜tool▁call▁begin｜>, before <｜tool▁sep｜>
    CallBody,  // after <｜tool▁sep｜>
  };

  void flush(std::vector<ChatEvent>& events) { emit(decoder_.flush(), events); }

  void end_reply(std::vector<ChatEvent>& events) override {
    flush(events);
    if (state_ == State::CallType || state_ == State::CallBody) close_call(/*closed=*/false, events);
  }

  void close_call(bool closed, std::vector<ChatEvent>& events) {
    const bool has_sep = state_ == State::CallBody;
    std::optional<ToolCall> call = closed && has_sep ? parse_call(type_, body_) : std::nullopt;
    if (call) {
      events.push_back({ChatEvent::Kind::ToolCall, call->arguments, call->name});
      reply_.tool_calls.push_back(std::move(*call));
    } else {  // fail closed: the call is answer text as written
      std::string text = cat({kCallBegin, type_});
      if (has_sep) text += cat({kSep, body_});
      if (closed) text += kCallEnd;
      content(std::move(text), events);
    }
    type_.clear();
    body_.clear();
    state_ = in_block_ ? State::Calls : State::Text;
  }

  void emit(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    switch (state_) {
      case State::CallType: type_ += text; break;
      case State::CallBody: body_ += text; break;
      case State::Calls:  // newlines between calls are markup; other text is answer text
        if (trim(text).empty()) break;
        content(std::move(text), events);
        break;
      case State::Text:
        if (!answer_started_) {  // the blank lines after </think> are markup
          const size_t start = text.find_first_not_of(" \t\r\n");
          if (start == std::string::npos) break;
          text.erase(0, start);
          answer_started_ = true;
        }
        content(std::move(text), events);
        break;
      case State::Reasoning:
        reply_.reasoning += text;
        events.push_back({ChatEvent::Kind::Reasoning, std::move(text)});
        break;
    }
  }

  void content(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    reply_.content += text;
    events.push_back({ChatEvent::Kind::Content, std::move(text)});
  }

  Ids ids_;
  State state_;
  bool answer_started_ = true;  // false right after </think>
  bool in_block_ = false;  // inside <｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>
  std::string type_, body_;
};

class DeepseekFormat final : public ChatFormat {
 public:
  DeepseekFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops)
      : tokenizer_(tokenizer),
        flavor_(tokenizer.token_id(kThink) >= 0 && tokenizer.token_id(kThinkEnd) >= 0 ? DeepseekFlavor::R1
                                                                                      : DeepseekFlavor::V3) {
    for (std::string_view token : {kBos, kEos, kUser, kAssistant})
      if (tokenizer.token_id(token) < 0)
        fail("the tokenizer has no {} token, which DeepSeek-V3's chat format uses", token);
    stops_.push_back(tokenizer.token_id(kEos));
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
    ids_.calls_begin = tokenizer.token_id(kCallsBegin);
    ids_.calls_end = tokenizer.token_id(kCallsEnd);
    ids_.call_begin = tokenizer.token_id(kCallBegin);
    ids_.call_end = tokenizer.token_id(kCallEnd);
    ids_.sep = tokenizer.token_id(kSep);
    // Without all of a call's tokens no call can be recognised: text only.
    if (ids_.call_begin < 0 || ids_.call_end < 0 || ids_.sep < 0) ids_ = {};
    if (flavor_ == DeepseekFlavor::R1) {
      ids_.think = tokenizer.token_id(kThink);
      ids_.think_end = tokenizer.token_id(kThinkEnd);
    }
  }

  std::string_view name() const override { return flavor_ == DeepseekFlavor::R1 ? "deepseek-r1" : "deepseek-v3"; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return deepseek_chat::render(messages, options, flavor_);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions&) const override {
    return std::make_unique<DeepseekParser>(tokenizer_, stops_, ids_);
  }

 private:
  const Tokenizer& tokenizer_;
  DeepseekFlavor flavor_;
  std::vector<int32_t> stops_;
  DeepseekParser::Ids ids_;
};

}  // namespace deepseek_chat
}  // namespace

std::string render_deepseek_v3(std::span<const ChatMessage> messages, const ChatFormatOptions& options,
                               DeepseekFlavor flavor) {
  return deepseek_chat::render(messages, options, flavor);
}

std::unique_ptr<ChatFormat> make_deepseek_v3_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<deepseek_chat::DeepseekFormat>(tokenizer, model_stops);
}

}  // namespace tern
