#include "tern/runtime/glm45_chat.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/runtime/chat_template.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// Names of one file in the library's unity build must differ from every
// other file's: this file's helpers live in glm45_chat.
namespace {
namespace glm45_chat {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kPrefix = "[gMASK]<sop>";
constexpr std::string_view kSystem = "<|system|>";
constexpr std::string_view kUser = "<|user|>";
constexpr std::string_view kAssistant = "<|assistant|>";
constexpr std::string_view kObservation = "<|observation|>";
constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kCall = "<tool_call>";
constexpr std::string_view kCallEnd = "</tool_call>";
constexpr std::string_view kKey = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValue = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";

// The template's tools block, between [gMASK]<sop> and the tools / after them.
constexpr std::string_view kToolsHead =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kToolsTail =
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML "
    "format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";

// Length of the UTF-8 character at s[i] if it is whitespace to Python's
// str.isspace() (what the template's strip() removes), else 0.
size_t py_space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  auto cp_at = [&](size_t n) -> uint32_t {
    if (i + n > s.size()) return 0;
    uint32_t cp = n == 2 ? (c & 0x1f) : (c & 0x0f);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    return cp;
  };
  if ((c & 0xe0) == 0xc0) {
    const uint32_t cp = cp_at(2);
    return cp == 0x85 || cp == 0xa0 ? 2 : 0;
  }
  if ((c & 0xf0) == 0xe0) {
    const uint32_t cp = cp_at(3);
    const bool space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                       cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return space ? 3 : 0;
  }
  return 0;
}

// Python's str.strip().
std::string_view py_strip(std::string_view s) {
  while (!s.empty()) {
    const size_t n = py_space_at(s, 0);
    if (n == 0) break;
    s.remove_prefix(n);
  }
  for (;;) {
    size_t last = std::string_view::npos;  // start of the last character if it is whitespace
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back)
      if (py_space_at(s, s.size() - back) == back) {
        last = s.size() - back;
        break;
      }
    if (last == std::string_view::npos) break;
    s.remove_suffix(s.size() - last);
  }
  return s;
}

std::string_view strip_newlines(std::string_view s, bool left) {
  if (left)
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  else
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

ordered_json parse_object(const std::string& text, const std::string& what) {
  check_json_depth(text, what);
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: invalid JSON", what);
  return j;
}

// Follows the template (src/tern/tokenizer/glm45_chat_template.h) branch by branch.
std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  auto is_system = [](const ChatMessage& m) { return m.role == "system" || m.role == "developer"; };
  int64_t last_user_index = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (!is_system(messages[i]) && r != "user" && r != "assistant" && r != "tool")
      fail("message {} has role '{}'; GLM-4.5's chat format takes system, user, assistant and tool messages", i, r);
    if (r == "user") last_user_index = static_cast<int64_t>(i);
  }
  std::string out(kPrefix);
  if (!options.tools.empty()) {
    out += kToolsHead;
    for (const ToolDefinition& tool : options.tools) out += tool_template_json(tool) + "\n";
    out += kToolsTail;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      out += std::string(kUser) + "\n" + m.content;
      if (!options.enable_thinking.value_or(true) && !m.content.ends_with("/nothink")) out += "/nothink";
    } else if (m.role == "assistant") {
      std::string_view reasoning = m.reasoning;
      std::string_view content = m.content;
      if (reasoning.empty() && content.find(kThinkEnd) != std::string_view::npos) {
        std::string_view before_first_close = strip_newlines(content.substr(0, content.find(kThinkEnd)), false);
        const size_t open = before_first_close.rfind(kThink);
        if (open != std::string_view::npos) before_first_close.remove_prefix(open + kThink.size());
        reasoning = strip_newlines(before_first_close, true);
        content = strip_newlines(content.substr(content.rfind(kThinkEnd) + kThinkEnd.size()), true);
      }
      out += kAssistant;
      if (static_cast<int64_t>(i) > last_user_index && !reasoning.empty())
        out += "\n<think>" + std::string(py_strip(reasoning)) + "</think>";
      else
        out += "\n<think></think>";
      if (!py_strip(content).empty()) out += "\n" + std::string(py_strip(content));
      for (const ToolCall& call : m.tool_calls) {
        const std::string what = fmt::format("the arguments of tool call '{}'", call.name);
        const ordered_json args = parse_object(call.arguments.empty() ? "{}" : call.arguments, what);
        if (!args.is_object()) fail("{} are not a JSON object; GLM-4.5's chat template needs one", what);
        out += "\n<tool_call>" + call.name + "\n";
        for (const auto& [k, v] : args.items())
          out += "<arg_key>" + k + "</arg_key>\n<arg_value>" + (v.is_string() ? v.get<std::string>()
                                                                               : python_json_dumps(v)) +
                 "</arg_value>\n";
        out += kCallEnd;
      }
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += kObservation;
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
    } else {  // system, developer
      out += std::string(kSystem) + "\n" + m.content;
    }
  }
  if (options.add_generation_prompt) {
    out += kAssistant;
    if (!options.enable_thinking.value_or(true)) out += "\n<think></think>";
  }
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Streams one stripped section (the reasoning, the answer): whitespace at its
// start is dropped, whitespace at its end is held back until text follows.
struct Section {
  bool started = false;
  std::string pending;  // trailing whitespace held back

  // The text to emit for `text` (possibly empty).
  std::string push(std::string_view text) {
    if (!started) text = trim(text).empty() ? std::string_view{} : text.substr(text.find_first_not_of(" \t\n\r\v\f"));
    if (text.empty()) return {};
    size_t body = text.size();
    while (body > 0 && is_space(text[body - 1])) --body;
    if (body == 0) {
      pending += text;
      return {};
    }
    std::string out = std::move(pending) + std::string(text.substr(0, body));
    pending = std::string(text.substr(body));
    started = true;
    return out;
  }
};

// Names of the arguments that each offered tool's parameters declare strings.
using StringArgs = std::map<std::string, std::set<std::string>, std::less<>>;

StringArgs string_args(const std::vector<ToolDefinition>& tools) {
  StringArgs out;
  for (const ToolDefinition& tool : tools) {
    ordered_json params;
    try {
      if (!tool.parameters.empty()) {
        params = parse_object(tool.parameters, "tool parameters");
      } else if (!tool.json.empty()) {
        const ordered_json j = parse_object(tool.json, "tool");
        if (j.contains("function") && j["function"].is_object() && j["function"].contains("parameters"))
          params = j["function"]["parameters"];
      }
    } catch (const std::exception&) {
      continue;  // no schema: values are parsed as JSON where they are JSON
    }
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) continue;
    for (const auto& [name, schema] : params["properties"].items()) {
      if (!schema.is_object() || !schema.contains("type")) continue;
      const ordered_json& type = schema["type"];
      const bool is_string = type == "string" ||
                             (type.is_array() && std::find(type.begin(), type.end(), "string") != type.end());
      if (is_string) out[tool.name].insert(name);
    }
  }
  return out;
}

// Reply: optionally "<think>REASONING</think>", then answer text and tool calls.
class Glm45Parser final : public ReplyParser {
 public:
  struct Ids {
    int32_t think = -1, think_end = -1, call = -1, call_end = -1, key = -1, key_end = -1, value = -1,
            value_end = -1;
  };

  Glm45Parser(const Tokenizer& tokenizer, std::vector<int32_t> stops, Ids ids, StringArgs string_args)
      : ReplyParser(tokenizer, std::move(stops)),
        ids_(ids),
        string_args_(std::move(string_args)) {}

 private:
  enum class State {
    Answer,     // answer text (a <think> may open reasoning while nothing has been written)
    Reasoning,  // inside <think>
    CallName,   // after <tool_call>
    Key,        // inside <arg_key>
    AfterKey,   // after </arg_key>, before <arg_value>
    Value,      // inside <arg_value>
    AfterValue  // after </arg_value>: another <arg_key> or </tool_call>
  };

  bool in_call() const { return state_ != State::Answer && state_ != State::Reasoning; }

  void handle(int32_t id, std::vector<ChatEvent>& events) override {
    if (id >= 0 && id == ids_.think && state_ == State::Answer && !answer_.started && !thought_) {
      flush(events);
      answer_ = {};
      state_ = State::Reasoning;
      thought_ = true;
      return;
    }
    if (id >= 0 && id == ids_.think_end && state_ == State::Reasoning) {
      flush(events);
      state_ = State::Answer;
      return;
    }
    if (id >= 0 && id == ids_.call && state_ == State::Answer) {
      flush(events);
      answer_.pending.clear();  // the template strips the answer before the calls
      state_ = State::CallName;
      raw_ = kCall;
      return;
    }
    if (in_call() && id >= 0 && is_marker(id)) {
      flush(events);
      if (!call_marker(id)) {  // not where it belongs: the call is text as written, then the token as usual
        abandon_call(events);
        handle(id, events);
        return;
      }
      for (ChatEvent& e : pending_events_) events.push_back(std::move(e));
      pending_events_.clear();
      return;
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return;  // stray control token
    emit(decoder_.push(id), events);
  }

  bool is_marker(int32_t id) const {
    return id == ids_.think || id == ids_.think_end || id == ids_.call || id == ids_.call_end || id == ids_.key ||
           id == ids_.key_end || id == ids_.value || id == ids_.value_end;
  }

  // A marker inside a call; false when it does not fit there.
  bool call_marker(int32_t id) {
    switch (state_) {
      case State::CallName:
        name_ = std::string(trim(text_));
        text_.clear();
        if (name_.empty()) return false;
        if (id == ids_.key) return advance(State::Key, kKey);
        if (id == ids_.call_end) return complete();
        return false;
      case State::Key:
        if (id != ids_.key_end) return false;
        key_ = std::string(trim(text_));
        text_.clear();
        return advance(State::AfterKey, kKeyEnd);
      case State::AfterKey:
        if (id != ids_.value || !trim(text_).empty()) return false;
        text_.clear();
        return advance(State::Value, kValue);
      case State::Value:
        if (id != ids_.value_end) return false;
        args_.emplace_back(key_, std::string(trim(text_)));
        text_.clear();
        return advance(State::AfterValue, kValueEnd);
      case State::AfterValue:
        if (!trim(text_).empty()) return false;
        text_.clear();
        if (id == ids_.key) return advance(State::Key, kKey);
        if (id == ids_.call_end) return complete();
        return false;
      default: return false;
    }
  }

  bool advance(State next, std::string_view marker) {
    raw_ += marker;
    state_ = next;
    return true;
  }

  // </tool_call> of a well-formed call.
  bool complete() {
    ordered_json arguments = ordered_json::object();
    const auto strings = string_args_.find(name_);
    for (const auto& [key, value] : args_) {
      const bool declared_string = strings != string_args_.end() && strings->second.contains(key);
      ordered_json parsed;
      if (!declared_string) {
        try {
          check_json_depth(value, "tool call argument");
          parsed = ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
        } catch (const std::exception&) {
          parsed = ordered_json(ordered_json::value_t::discarded);
        }
      }
      arguments[key] = declared_string || parsed.is_discarded() ? ordered_json(value) : std::move(parsed);
    }
    ToolCall call{name_, python_json_dumps(arguments)};
    pending_events_.push_back({ChatEvent::Kind::ToolCall, call.arguments, call.name});
    reply_.tool_calls.push_back(std::move(call));
    reset_call();
    return true;
  }

  void reset_call() {
    raw_.clear();
    text_.clear();
    name_.clear();
    key_.clear();
    args_.clear();
    state_ = State::Answer;
  }

  // Fail closed: the call so far is answer text, markup included.
  void abandon_call(std::vector<ChatEvent>& events) {
    std::string text = std::move(raw_);  // markup and text as written
    reset_call();
    content(text, events);
  }

  void flush(std::vector<ChatEvent>& events) {
    emit(decoder_.flush(), events);
    for (ChatEvent& e : pending_events_) events.push_back(std::move(e));
    pending_events_.clear();
  }

  void end_reply(std::vector<ChatEvent>& events) override {
    flush(events);
    if (in_call()) abandon_call(events);
    for (ChatEvent& e : pending_events_) events.push_back(std::move(e));
    pending_events_.clear();
  }

  void emit(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    if (state_ == State::Reasoning) {
      std::string out = reasoning_.push(text);
      if (out.empty()) return;
      reply_.reasoning += out;
      events.push_back({ChatEvent::Kind::Reasoning, std::move(out)});
    } else if (state_ == State::Answer) {
      content(text, events);
    } else {
      raw_ += text;
      text_ += text;
    }
  }

  void content(std::string_view text, std::vector<ChatEvent>& events) {
    std::string out = answer_.push(text);
    if (out.empty()) return;
    reply_.content += out;
    events.push_back({ChatEvent::Kind::Content, std::move(out)});
  }

  Ids ids_;
  StringArgs string_args_;
  State state_ = State::Answer;
  bool thought_ = false;  // a <think> block has been opened
  Section reasoning_, answer_;
  std::string raw_;   // the current call as written, markup and text
  std::string text_;  // text since the call's last marker
  std::string name_, key_;
  std::vector<std::pair<std::string, std::string>> args_;
  std::vector<ChatEvent> pending_events_;  // a completed call, reported after the text before it
};

class Glm45Format final : public ChatFormat {
 public:
  Glm45Format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) : tokenizer_(tokenizer) {
    for (std::string_view token : {std::string_view("[gMASK]"), std::string_view("<sop>"), kSystem, kUser,
                                   kAssistant, kObservation})
      if (tokenizer.token_id(token) < 0)
        fail("the tokenizer has no {} token, which GLM-4.5's chat format uses", token);
    for (std::string_view token : {kEndOfText, kUser, kObservation})
      if (const int32_t id = tokenizer.token_id(token); id >= 0) stops_.push_back(id);
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
    ids_.think = tokenizer.token_id(kThink);
    ids_.think_end = tokenizer.token_id(kThinkEnd);
    ids_.call = tokenizer.token_id(kCall);
    ids_.call_end = tokenizer.token_id(kCallEnd);
    ids_.key = tokenizer.token_id(kKey);
    ids_.key_end = tokenizer.token_id(kKeyEnd);
    ids_.value = tokenizer.token_id(kValue);
    ids_.value_end = tokenizer.token_id(kValueEnd);
    // Without all of a call's tokens no call can be recognised: text only.
    if (ids_.call < 0 || ids_.call_end < 0 || ids_.key < 0 || ids_.key_end < 0 || ids_.value < 0 ||
        ids_.value_end < 0)
      ids_.call = ids_.call_end = ids_.key = ids_.key_end = ids_.value = ids_.value_end = -1;
  }

  std::string_view name() const override { return "glm-4.5"; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return glm45_chat::render(messages, options);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions& options) const override {
    return std::make_unique<Glm45Parser>(tokenizer_, stops_, ids_, string_args(options.tools));
  }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> stops_;
  Glm45Parser::Ids ids_;
};

}  // namespace glm45_chat
}  // namespace

std::string render_glm45(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  return glm45_chat::render(messages, options);
}

std::unique_ptr<ChatFormat> make_glm45_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<glm45_chat::Glm45Format>(tokenizer, model_stops);
}

}  // namespace tern
