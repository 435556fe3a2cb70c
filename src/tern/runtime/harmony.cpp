#include "tern/runtime/harmony.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/runtime/chat_template.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace {

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &local);
  return text;
}

bool is_iso_date(const std::string& d) {
  if (d.size() != 10 || d[4] != '-' || d[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (d[i] < '0' || d[i] > '9') return false;
  return true;
}

bool has_channel_markup(const std::string& text) {
  return text.find("<|channel|>analysis<|message|>") != std::string::npos ||
         text.find("<|channel|>final<|message|>") != std::string::npos;
}

// ---- Tool definitions, as the template's render_tool_namespace and
// render_typescript_type macros write them. Jinja's semantics are followed
// where a schema is odd: a missing key is undefined, a test of a value is
// Python's truthiness, `x in list` is equality with an element, and string
// concatenation and join write values as Python's str() does. Where the
// template would raise (a non-string concatenated to a string, .items() of a
// non-object), the value is written as str() would, or the schema taken as
// having no properties, rather than failing.

// In their own namespace: the library builds as unity files, and names like
// join or is_string exist in other files' anonymous namespaces.
namespace harmony_tools {

using ordered_json = nlohmann::ordered_json;

// spec.key: null unless `spec` is an object holding `key` (Jinja: undefined).
const ordered_json* member(const ordered_json& spec, const char* key) {
  if (!spec.is_object()) return nullptr;
  auto it = spec.find(key);
  return it == spec.end() ? nullptr : &*it;
}

// Python's bool(value); an undefined value is false.
bool truthy(const ordered_json* v) {
  if (!v) return false;
  switch (v->type()) {
    case ordered_json::value_t::boolean: return v->get<bool>();
    case ordered_json::value_t::number_integer: return v->get<int64_t>() != 0;
    case ordered_json::value_t::number_unsigned: return v->get<uint64_t>() != 0;
    case ordered_json::value_t::number_float: return v->get<double>() != 0.0;
    case ordered_json::value_t::string: return !v->get_ref<const std::string&>().empty();
    case ordered_json::value_t::array:
    case ordered_json::value_t::object: return !v->empty();
    default: return false;  // null
  }
}

bool is_string(const ordered_json* v, const char* text) { return v && v->is_string() && *v == text; }

// Python's repr() of a str (quotes chosen as Python chooses them).
std::string python_repr_string(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') out += {'\\', ch};
    else if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else if (ch == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out + quote;
}

std::string python_str(const ordered_json& v, bool repr = false);

// Python's str() of a JSON value: what Jinja's `+`, `~` and join write.
std::string python_str(const ordered_json& v, bool repr) {
  switch (v.type()) {
    case ordered_json::value_t::string:
      return repr ? python_repr_string(v.get_ref<const std::string&>()) : v.get<std::string>();
    case ordered_json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case ordered_json::value_t::null: return "None";
    case ordered_json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_str(v[i], true);
      return out + "]";
    }
    case ordered_json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        out += (first ? "" : ", ") + python_repr_string(key) + ": " + python_str(value, true);
        first = false;
      }
      return out + "}";
    }
    default: return python_json_dumps(v);  // numbers: int, or float's repr
  }
}

// What `for x in value` yields, each as str(): list elements, object keys, a string's characters.
std::vector<std::string> iterate_str(const ordered_json& v) {
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const auto& e : v) out.push_back(python_str(e));
  } else if (v.is_object()) {
    for (const auto& [key, value] : v.items()) out.push_back(key);
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    for (size_t i = 0; i < s.size();) {
      size_t n = 1;
      while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
      out.push_back(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

// Python's len() of a UTF-8 string: code points.
size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// `name not in (required or [])`, negated.
bool is_required(const std::string& name, const ordered_json* required) {
  if (!truthy(required)) return false;
  if (required->is_array())
    return std::any_of(required->begin(), required->end(), [&](const ordered_json& r) { return r == name; });
  if (required->is_object()) return required->contains(name);
  if (required->is_string()) return required->get_ref<const std::string&>().find(name) != std::string::npos;
  return false;
}

// render_typescript_type(spec): the TypeScript type of one JSON Schema.
std::string typescript_type(const ordered_json& spec) {
  const ordered_json* type = member(spec, "type");
  const bool nullable = truthy(member(spec, "nullable"));
  if (is_string(type, "array")) {
    std::string out = "any[]";
    if (const ordered_json* items = member(spec, "items")) {
      const ordered_json* item_type = member(*items, "type");
      if (is_string(item_type, "string")) {
        out = "string[]";
      } else if (is_string(item_type, "number") || is_string(item_type, "integer")) {
        out = "number[]";
      } else if (is_string(item_type, "boolean")) {
        out = "boolean[]";
      } else {
        const std::string inner = typescript_type(*items);
        out = inner == "object | object" || utf8_length(inner) > 50 ? "any[]" : inner + "[]";
      }
    }
    return nullable ? out + " | null" : out;
  }
  if (type && type->is_array() && !type->empty()) return join(iterate_str(*type), " | ");  // ["string", "null"]
  if (const ordered_json* one_of = member(spec, "oneOf"); truthy(one_of)) {
    // The template's has_object_variants is set inside a for loop, which in
    // Jinja does not change it outside: every variant is always written.
    std::string out;
    const size_t n = one_of->is_array() ? one_of->size() : iterate_str(*one_of).size();
    for (size_t i = 0; i < n; ++i) {
      static const ordered_json kNone;  // a key or character of a non-list oneOf: no schema
      const ordered_json& variant = one_of->is_array() ? (*one_of)[i] : kNone;
      out += typescript_type(variant);
      if (const ordered_json* d = member(variant, "description"); truthy(d)) out += "// " + python_str(*d);
      if (const ordered_json* d = member(variant, "default"))
        out += std::string(20, ' ') + "// default: " + python_json_dumps(*d);  // the template's indentation
      if (i + 1 < n) out += " | \n";
    }
    return out;
  }
  if (is_string(type, "string")) {
    if (const ordered_json* e = member(spec, "enum"); truthy(e)) return '"' + join(iterate_str(*e), "\" | \"") + '"';
    return nullable ? "string | null" : "string";
  }
  if (is_string(type, "number") || is_string(type, "integer")) return "number";
  if (is_string(type, "boolean")) return "boolean";
  if (is_string(type, "object")) {
    const ordered_json* properties = member(spec, "properties");
    if (!truthy(properties) || !properties->is_object()) return "object";
    const ordered_json* required = member(spec, "required");
    std::string out = "{\n";
    size_t i = 0;
    for (const auto& [name, property] : properties->items()) {
      out += name + (is_required(name, required) ? "" : "?") + ": ";
      out += "\n" + std::string(16, ' ') + typescript_type(property);  // the template's line break and indentation
      if (++i < properties->size()) out += ", ";
    }
    return out + "}";
  }
  return "any";
}

// render_tool_namespace("functions", tools).
std::string tool_namespace(const std::vector<ToolDefinition>& tools) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const ToolDefinition& tool : tools) {
    out += "// " + tool.description + "\n";
    out += "type " + tool.name + " = ";
    ordered_json parameters;
    if (!tool.parameters.empty()) {
      const std::string what = fmt::format("the parameters of tool '{}'", tool.name);
      check_json_depth(tool.parameters, what);
      parameters = ordered_json::parse(tool.parameters, nullptr, /*allow_exceptions=*/false);
      if (parameters.is_discarded()) fail("{}: invalid JSON", what);
    }
    const ordered_json* properties = member(parameters, "properties");
    if (!truthy(&parameters) || !truthy(properties) || !properties->is_object()) {
      out += "() => any;\n\n";
      continue;
    }
    const ordered_json* required = member(parameters, "required");
    out += "(_: {\n";
    for (const auto& [name, spec] : properties->items()) {
      if (const ordered_json* d = member(spec, "description"); truthy(d)) out += "// " + python_str(*d) + "\n";
      out += name + (is_required(name, required) ? "" : "?") + ": " + typescript_type(spec);
      if (const ordered_json* d = member(spec, "default")) {
        if (truthy(member(spec, "enum"))) out += ", // default: " + python_str(*d);
        else if (truthy(member(spec, "oneOf"))) out += "// default: " + python_str(*d);
        else out += ", // default: " + python_json_dumps(*d);
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

// The template writes `tool_call.arguments|tojson`, the arguments being an
// object in Hugging Face's convention: JSON arguments come out as Python's
// json.dumps writes them ({"city": "Paris"}); text that is not JSON as it is.
std::string tool_call_arguments(const std::string& arguments) {
  try {
    check_json_depth(arguments, "tool call arguments");
  } catch (const Error&) {
    return arguments;
  }
  ordered_json j = ordered_json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? arguments : python_json_dumps(j);
}

}  // namespace harmony_tools

}  // namespace

std::string json_string_literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string render_harmony(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options) {
  const std::string& effort = options.reasoning_effort;
  if (effort != "low" && effort != "medium" && effort != "high")
    fail("reasoning effort '{}' is not one of low, medium, high", effort);
  if (!options.date.empty() && !is_iso_date(options.date))
    fail("date '{}' is not in the form YYYY-MM-DD", options.date);
  const std::string date = options.date.empty() ? today() : options.date;

  std::string out =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: " + date + "\n\nReasoning: " + effort +
      "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (!options.tools.empty()) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  out += "<|end|>";

  size_t first = 0;
  std::string developer;
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
    developer = messages[0].content;
    first = 1;
  }
  if (!developer.empty() || !options.tools.empty()) {
    out += "<|start|>developer<|message|>";
    if (!developer.empty()) out += "# Instructions\n\n" + developer + "\n\n";
    if (!options.tools.empty()) out += "# Tools\n\n" + harmony_tools::tool_namespace(options.tools);
    out += "<|end|>";
  }

  const std::string* last_tool_call = nullptr;  // name of the call the next tool message answers
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      if (has_channel_markup(m.content) || has_channel_markup(m.reasoning))
        fail("an assistant message holds <|channel|> markup: pass the analysis as reasoning and the final "
             "answer as content");
      if (!m.tool_calls.empty()) {
        // The call's analysis stays unless a later final answer exists (the
        // only case where inference renders chain of thought).
        bool final_follows = false;
        for (size_t j = i + 1; j < messages.size(); ++j)
          if (messages[j].role == "assistant" && messages[j].tool_calls.empty()) final_follows = true;
        if (!m.content.empty() && !m.reasoning.empty())
          fail("an assistant message with tool calls cannot have both content and reasoning");
        const std::string& analysis = m.content.empty() ? m.reasoning : m.content;
        if (!analysis.empty() && !final_follows)
          out += "<|start|>assistant<|channel|>analysis<|message|>" + analysis + "<|end|>";
        const ToolCall& call = m.tool_calls[0];  // the template renders one call per message
        out += "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" +
               harmony_tools::tool_call_arguments(call.arguments) + "<|call|>";
        last_tool_call = &call.name;
      } else if (i + 1 == messages.size() && !options.add_generation_prompt) {
        // Training layout: the last reply keeps its analysis and ends with <|return|>.
        if (!m.reasoning.empty()) out += "<|start|>assistant<|channel|>analysis<|message|>" + m.reasoning + "<|end|>";
        out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|return|>";
      } else {
        out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";  // analysis dropped
        last_tool_call = nullptr;
      }
    } else if (m.role == "tool") {
      if (!last_tool_call) fail("a tool message must follow an assistant message with a tool call");
      out += "<|start|>functions." + *last_tool_call + " to=assistant<|channel|>commentary<|message|>" +
             json_string_literal(m.content) + "<|end|>";
    } else if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
    } else if (m.role != "system" && m.role != "developer") {
      fail("unsupported chat role '{}' (use system, developer, user, assistant or tool)", m.role);
    }  // a later system/developer message: the template renders only a leading one
  }
  if (options.add_generation_prompt) out += "<|start|>assistant";
  return out;
}

namespace {

// Harmony's structural tokens.
struct HarmonyTokens {
  int32_t start, end, message, channel, constrain, ret, call;
};

// Longest header (role, recipient, channel, content type) before it is
// taken for answer text that lacks a header; real ones are well under 100 bytes.
constexpr size_t kMaxHeaderBytes = 256;

// Reply = messages, each "[<|start|>role][ to=R]<|channel|>C[ <|constrain|>T]<|message|>body"
// closed by <|end|>, or ending the reply with <|return|> / <|call|>.
class HarmonyParser final : public ChatOutputParser {
 public:
  HarmonyParser(const Tokenizer& tokenizer, HarmonyTokens ids, std::vector<int32_t> stops)
      : tokenizer_(tokenizer), ids_(ids), stops_(std::move(stops)), decoder_(tokenizer) {}

  std::vector<ChatEvent> push(int32_t id) override {
    std::vector<ChatEvent> events;
    if (done()) return events;
    if (std::find(stops_.begin(), stops_.end(), id) != stops_.end()) {
      close_message(events);
      finish_ = id == ids_.call && !reply_.tool_calls.empty() ? FinishReason::ToolCalls : FinishReason::Stop;
      events.push_back({ChatEvent::Kind::End});
    } else if (id == ids_.start) {
      close_message(events);
      begin_header(/*role_known=*/false);
    } else if (id == ids_.end) {
      close_message(events);
    } else if (id == ids_.channel || id == ids_.constrain) {
      if (state_ != State::Header) {  // a header without <|start|>: another assistant message
        close_message(events);
        begin_header(/*role_known=*/true);
      }
      header_ += tokenizer_.token_piece(id);
    } else if (id == ids_.message) {
      if (state_ == State::Header) open_message(events);  // a stray one inside a body is ignored
    } else if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) {
      // Other control tokens (<|startoftext|>, reserved ids) carry no text.
    } else if (state_ == State::Header) {
      header_ += tokenizer_.token_piece(id);
      if (header_.size() > kMaxHeaderBytes) header_as_answer(events);
    } else {
      if (state_ == State::Between) {  // text outside any message: answer text
        state_ = State::Body;
        target_ = Target::Content;
      }
      emit(decoder_.push(id), events);
    }
    return events;
  }

  std::vector<ChatEvent> finish() override {
    std::vector<ChatEvent> events;
    if (done()) return events;
    if (state_ == State::Body && target_ == Target::Tool) state_ = State::Between;  // unfinished call: dropped
    close_message(events);
    return events;
  }

 private:
  enum class State { Header, Body, Between };
  enum class Target { Reasoning, Content, Tool };

  void begin_header(bool role_known) {
    state_ = State::Header;
    header_.clear();
    role_known_ = role_known;
  }

  // <|message|> ends the header: decide where the body goes.
  void open_message(std::vector<ChatEvent>& events) {
    const std::string& h = header_;
    auto word_at = [&](size_t pos) {
      while (pos < h.size() && h[pos] == ' ') ++pos;
      size_t end = pos;
      while (end < h.size() && h[end] != ' ' && h[end] != '\n' && h[end] != '<') ++end;
      return h.substr(pos, end - pos);
    };
    if (!role_known_) {
      std::string role = word_at(0);
      if (!role.empty() && role != "assistant") {  // the model began another author's turn: the reply is over
        state_ = State::Between;
        finish_ = FinishReason::Stop;
        events.push_back({ChatEvent::Kind::End});
        return;
      }
    }
    std::string recipient, channel;
    if (auto p = h.find("to="); p != std::string::npos) recipient = word_at(p + 3);
    if (auto p = h.find("<|channel|>"); p != std::string::npos) channel = word_at(p + 11);
    if (!recipient.empty()) {
      target_ = Target::Tool;
      tool_ = {recipient.starts_with("functions.") ? recipient.substr(10) : recipient, ""};
    } else {
      target_ = channel == "analysis" ? Target::Reasoning : Target::Content;  // final, commentary, unknown
    }
    state_ = State::Body;
    header_.clear();
  }

  // A header grew too long to be one: it was answer text without a header.
  void header_as_answer(std::vector<ChatEvent>& events) {
    state_ = State::Body;
    target_ = Target::Content;
    std::string text = std::move(header_);
    header_.clear();
    emit(decoder_.push_bytes(text), events);
  }

  void close_message(std::vector<ChatEvent>& events) {
    if (state_ == State::Header && role_known_ && !header_.empty() &&
        header_.find("<|channel|>") == std::string::npos && header_.find("to=") == std::string::npos) {
      header_as_answer(events);  // the model skipped the header: its text is the answer
    }
    if (state_ == State::Body) {
      emit(decoder_.flush(), events);
      if (target_ == Target::Tool) {
        events.push_back({ChatEvent::Kind::ToolCall, tool_.arguments, tool_.name});
        reply_.tool_calls.push_back(std::move(tool_));
        tool_ = {};
      }
    }
    state_ = State::Between;
    header_.clear();
  }

  void emit(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    switch (target_) {
      case Target::Reasoning:
        reply_.reasoning += text;
        events.push_back({ChatEvent::Kind::Reasoning, std::move(text)});
        break;
      case Target::Content:
        reply_.content += text;
        events.push_back({ChatEvent::Kind::Content, std::move(text)});
        break;
      case Target::Tool:
        tool_.arguments += text;
        break;
    }
  }

  const Tokenizer& tokenizer_;
  HarmonyTokens ids_;
  std::vector<int32_t> stops_;
  StreamDecoder decoder_;
  // The prompt ends with "<|start|>assistant": the reply opens in a header whose role is known.
  State state_ = State::Header;
  bool role_known_ = true;
  std::string header_;
  Target target_ = Target::Content;
  ToolCall tool_;
};

class HarmonyFormat final : public ChatFormat {
 public:
  HarmonyFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) : tokenizer_(tokenizer) {
    auto need = [&](const char* token) {
      int32_t id = tokenizer.token_id(token);
      if (id < 0) fail("the tokenizer has no {} token, which the harmony chat format needs", token);
      return id;
    };
    ids_ = {need("<|start|>"), need("<|end|>"), need("<|message|>"), need("<|channel|>"),
            need("<|constrain|>"), need("<|return|>"), need("<|call|>")};
    stops_ = {ids_.ret, ids_.call};
    const int32_t structure[] = {ids_.start, ids_.end, ids_.message, ids_.channel, ids_.constrain};
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end() &&
          std::find(std::begin(structure), std::end(structure), id) == std::end(structure))
        stops_.push_back(id);
  }

  std::string_view name() const override { return "harmony"; }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    return render_harmony(std::vector<ChatMessage>(messages.begin(), messages.end()), options);
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions&) const override {
    return std::make_unique<HarmonyParser>(tokenizer_, ids_, stops_);
  }

 private:
  const Tokenizer& tokenizer_;
  HarmonyTokens ids_{};
  std::vector<int32_t> stops_;
};

}  // namespace

std::unique_ptr<ChatFormat> make_harmony_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops) {
  return std::make_unique<HarmonyFormat>(tokenizer, model_stops);
}

}  // namespace tern
