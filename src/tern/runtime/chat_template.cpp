#include "tern/runtime/chat_template.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/runtime/harmony.h"
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

namespace {

using ordered_json = nlohmann::ordered_json;

// Python's str.lstrip('\n'), rstrip('\n'), strip('\n').
std::string lstrip_newlines(std::string s) {
  s.erase(0, std::min(s.find_first_not_of('\n'), s.size()));
  return s;
}
std::string rstrip_newlines(std::string s) {
  const size_t last = s.find_last_not_of('\n');
  s.erase(last == std::string::npos ? 0 : last + 1);
  return s;
}
std::string strip_newlines(std::string s) { return lstrip_newlines(rstrip_newlines(std::move(s))); }

// Python's json.dumps of a string (ensure_ascii=False): harmony's writer.
void dump_python_string(const std::string& s, std::string& out) { out += json_string_literal(s); }

// Python's repr(float): the shortest digits that read back as `d`, in fixed
// notation with at least one decimal when the decimal point falls between
// 10^-4 and 10^16, else d[.ddd]e±XX.
std::string python_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(r.ptr - buf));  // e.g. -1.2345e+17
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::stoi(std::string(s.substr(e + 1)));
  const int point = exponent + 1;  // digits are 0.DIGITS x 10^point
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    else if (point >= n) out += digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
    else out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return out;
}

void dump_python(const ordered_json& v, std::string& out) {
  switch (v.type()) {
    case ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump_python_string(key, out);
        out += ": ";
        dump_python(value, out);
      }
      out += '}';
      break;
    }
    case ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        dump_python(v[i], out);
      }
      out += ']';
      break;
    }
    case ordered_json::value_t::string: dump_python_string(v.get_ref<const std::string&>(), out); break;
    case ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case ordered_json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case ordered_json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case ordered_json::value_t::number_float: out += python_float(v.get<double>()); break;
    default: out += "null"; break;  // null, discarded, binary
  }
}

ordered_json parse_ordered(const std::string& text, std::string_view what) {
  check_json_depth(text, what);
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: invalid JSON", what);
  return j;
}

}  // namespace

std::string tool_template_json(const ToolDefinition& tool) {
  const std::string what = fmt::format("tool '{}'", tool.name);
  if (!tool.json.empty()) return python_json_dumps(parse_ordered(tool.json, what));
  ordered_json function = ordered_json::object();
  function["name"] = tool.name;
  if (!tool.description.empty()) function["description"] = tool.description;
  if (!tool.parameters.empty()) function["parameters"] = parse_ordered(tool.parameters, what);
  ordered_json j = ordered_json::object();
  j["type"] = "function";
  j["function"] = std::move(function);
  return python_json_dumps(j);
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  dump_python(value, out);
  return out;
}

// Follows Qwen3's chat template (src/tern/tokenizer/qwen3_chat_template.h)
// step by step; its Jinja is quoted where the rendering is not obvious.
std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatFormatOptions& options) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      fail("unsupported chat role '{}' (use system, user, assistant or tool)", r);
    if (r == "system" && i != 0) fail("a system message must come first");
  }
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::string out;
  if (!options.tools.empty()) {
    out += "<|im_start|>system\n";
    if (has_system) out += messages[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& tool : options.tools) out += "\n" + tool_template_json(tool);
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (has_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }
  // The last user message that is not a tool response: assistant turns after
  // it are steps of the current turn and keep their reasoning.
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const auto& m = messages[i];
    if (m.role == "user" && !(m.content.starts_with("<tool_response>") && m.content.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == "user") {
      out += "<|im_start|>user\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      // reasoning_content if given, else the content's <think>…</think>:
      //   content = content.split('</think>')[-1].lstrip('\n')
      //   reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
      std::string content = m.content, reasoning = m.reasoning;
      if (reasoning.empty()) {
        if (const size_t first_close = m.content.find("</think>"); first_close != std::string::npos) {
          content = lstrip_newlines(m.content.substr(m.content.rfind("</think>") + 8));
          std::string before = rstrip_newlines(m.content.substr(0, first_close));
          if (const size_t open = before.rfind("<think>"); open != std::string::npos) before.erase(0, open + 7);
          reasoning = lstrip_newlines(std::move(before));
        }
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (last || !reasoning.empty()))
        out += "<think>\n" + strip_newlines(reasoning) + "\n</think>\n\n" + lstrip_newlines(content);
      else
        out += content;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if (k > 0 || !content.empty()) out += "\n";
        // A string of arguments is written as it is.
        out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name + "\", \"arguments\": " + m.tool_calls[k].arguments +
               "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {  // consecutive tool results: one user turn
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // system: the first message only, rendered above.
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking.value_or(true)) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_qwen2_chatml(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  if (!options.tools.empty()) fail("Qwen2's chat template has no tools; send the request without them");
  std::string out;
  if (messages.empty() || messages[0].role != "system")
    out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
  for (const ChatMessage& m : messages) {
    if (!m.tool_calls.empty()) fail("an assistant message has tool calls; Qwen2's chat template has no tools");
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

namespace {

// The JSON of a <tool_call> block, {"name": "...", "arguments": {...}} (or
// arguments as a string of a JSON object); nullopt when it is anything else.
std::optional<ToolCall> parse_tool_call(const std::string& text) {
  try {
    check_json_depth(text, "tool call");  // dump recurses once per level
    const ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
    const auto args = j.find("arguments");
    if (args == j.end()) return std::nullopt;
    ordered_json arguments;
    if (args->is_object()) {
      arguments = *args;
    } else if (args->is_string()) {
      const std::string& inner = args->get_ref<const std::string&>();
      check_json_depth(inner, "tool call arguments");
      arguments = ordered_json::parse(inner, nullptr, /*allow_exceptions=*/false);
      if (arguments.is_discarded() || !arguments.is_object()) return std::nullopt;
    } else {
      return std::nullopt;
    }
    return ToolCall{name->get<std::string>(), arguments.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
  } catch (const std::exception&) {  // too deep; nothing else throws
    return std::nullopt;
  }
}

// Reply: optional "<think>" reasoning "</think>", then the answer and/or tool
// calls "<tool_call>\n{json}\n</tool_call>" (newline-separated), then a stop.
// Whitespace that only separates a call from the text before it, from
// another call or from the end of the reply is markup, not answer text. A
// call that does not parse, or is still open at the end, is answer text,
// markup included.
class ChatmlParser final : public ReplyParser {
 public:
  struct Ids {
    int32_t think_open = -1, think_close = -1, call_open = -1, call_close = -1;
  };

  // thinking: the reply may open with <think>; in_reasoning: the prompt
  // opened it (the reply is reasoning up to </think>).
  ChatmlParser(const Tokenizer& tokenizer, std::vector<int32_t> stops, Ids ids, bool thinking, bool in_reasoning)
      : ReplyParser(tokenizer, std::move(stops)), ids_(ids), may_think_(thinking && !in_reasoning),
        thinking_(in_reasoning), skip_newlines_(in_reasoning) {}

  void handle(int32_t id, std::vector<ChatEvent>& events) override {
    if (id == ids_.think_open && may_think_ && !thinking_) {  // only before any answer text
      thinking_ = true;
      may_think_ = false;
      skip_newlines_ = true;
      return;
    }
    if (id == ids_.think_close && thinking_) {
      flush(events);
      thinking_ = false;
      while (!reply_.reasoning.empty() && reply_.reasoning.back() == '\n') reply_.reasoning.pop_back();
      skip_newlines_ = true;
      return;
    }
    if (id == ids_.call_open && !thinking_ && !in_call_) {
      flush(events);  // a character split before the call is answer text
      in_call_ = true;
      may_think_ = false;
      skip_newlines_ = false;
      return;
    }
    if (id == ids_.call_close && in_call_) {
      flush(events);
      close_call(/*closed=*/true, events);
      return;
    }
    if (!tokenizer_.has_token(id) || tokenizer_.is_special(id)) return;  // stray control token
    emit(decoder_.push(id), events);
  }

 private:
  void flush(std::vector<ChatEvent>& events) { emit(decoder_.flush(), events); }

  // The reply ends: held-back text goes out, an open call as answer text.
  void end_reply(std::vector<ChatEvent>& events) override {
    flush(events);
    if (in_call_) close_call(/*closed=*/false, events);
    if (!after_call_ && !held_.empty()) append_content(std::move(held_), events);
    held_.clear();
  }

  void close_call(bool closed, std::vector<ChatEvent>& events) {
    in_call_ = false;
    std::string text = std::move(call_text_);
    call_text_.clear();
    std::optional<ToolCall> call = closed ? parse_tool_call(text) : std::nullopt;
    if (!call) {  // fail closed: the block is answer text as written
      content("<tool_call>" + text + (closed ? "</tool_call>" : ""), events);
      return;
    }
    held_.clear();  // the newline before a call is markup
    after_call_ = true;
    events.push_back({ChatEvent::Kind::ToolCall, call->arguments, call->name});
    reply_.tool_calls.push_back(std::move(*call));
  }

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
    if (in_call_) {
      call_text_ += text;
    } else if (thinking_) {
      reply_.reasoning += text;
      events.push_back({ChatEvent::Kind::Reasoning, std::move(text)});
    } else {
      content(std::move(text), events);
    }
  }

  // Answer text. Trailing whitespace is held back until it is known not to
  // separate the text from a tool call (only when the tokenizer has those).
  void content(std::string text, std::vector<ChatEvent>& events) {
    if (ids_.call_open < 0) return append_content(std::move(text), events);
    const size_t last = text.find_last_not_of(" \t\r\n");
    if (last == std::string::npos) {
      held_ += text;
      return;
    }
    // Whitespace after a call goes before text that follows, unless no text
    // came before the call (then it separates the text from nothing).
    std::string out = after_call_ && reply_.content.empty() ? std::string() : std::move(held_);
    out.append(text, 0, last + 1);
    held_.assign(text, last + 1);
    after_call_ = false;
    append_content(std::move(out), events);
  }

  void append_content(std::string text, std::vector<ChatEvent>& events) {
    if (text.empty()) return;
    reply_.content += text;
    events.push_back({ChatEvent::Kind::Content, std::move(text)});
  }

  Ids ids_;
  bool may_think_;
  bool thinking_;
  bool skip_newlines_;
  bool in_call_ = false;     // between <tool_call> and </tool_call>
  std::string call_text_;    // the open call's text
  std::string held_;         // answer whitespace not yet emitted
  bool after_call_ = false;  // no answer text since the last call
};

class ChatmlFormat final : public ChatFormat {
 public:
  ChatmlFormat(const Tokenizer& tokenizer, std::span<const int32_t> model_stops, ChatmlFlavor flavor)
      : tokenizer_(tokenizer), flavor_(flavor) {
    const int32_t im_end = tokenizer.token_id("<|im_end|>");
    if (im_end < 0) fail("the tokenizer has no <|im_end|> token, which ChatML needs");
    stops_.push_back(im_end);
    for (int32_t id : model_stops)
      if (std::find(stops_.begin(), stops_.end(), id) == stops_.end()) stops_.push_back(id);
    ids_.think_open = tokenizer.token_id("<think>");
    ids_.think_close = tokenizer.token_id("</think>");
    ids_.call_open = tokenizer.token_id("<tool_call>");
    ids_.call_close = tokenizer.token_id("</tool_call>");
    if (ids_.call_open < 0 || ids_.call_close < 0 || flavor == ChatmlFlavor::Qwen2)
      ids_.call_open = ids_.call_close = -1;
    if (flavor == ChatmlFlavor::Qwen2) ids_.think_open = ids_.think_close = -1;
  }

  std::string_view name() const override {
    return flavor_ == ChatmlFlavor::Qwen2           ? "qwen2-chatml"
           : flavor_ == ChatmlFlavor::Qwen3Thinking ? "qwen3-thinking-chatml"
           : flavor_ == ChatmlFlavor::Qwen3Instruct ? "qwen3-instruct-chatml"
                                                    : "qwen3-chatml";
  }
  std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const override {
    if (flavor_ == ChatmlFlavor::Qwen2) return render_qwen2_chatml(messages, options);
    const std::vector<ChatMessage> all(messages.begin(), messages.end());
    if (flavor_ == ChatmlFlavor::Qwen3Instruct) {
      ChatFormatOptions no_switch = options;
      no_switch.enable_thinking = true;  // the template has no switch: no empty think block
      return render_chatml(all, no_switch);
    }
    if (flavor_ != ChatmlFlavor::Qwen3Thinking) return render_chatml(all, options);
    ChatFormatOptions history = options;  // enable_thinking means nothing to this template
    history.add_generation_prompt = false;
    return render_chatml(all, history) + (options.add_generation_prompt ? "<|im_start|>assistant\n<think>\n" : "");
  }
  const std::vector<int32_t>& stop_tokens() const override { return stops_; }
  std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions& options) const override {
    const bool think_tokens = ids_.think_open >= 0 && ids_.think_close >= 0;
    const bool prompt_opened = flavor_ == ChatmlFlavor::Qwen3Thinking && think_tokens;
    return std::make_unique<ChatmlParser>(tokenizer_, stops_, ids_, options.enable_thinking.value_or(true) && think_tokens,
                                          prompt_opened);
  }

 private:
  const Tokenizer& tokenizer_;
  ChatmlFlavor flavor_;
  std::vector<int32_t> stops_;
  ChatmlParser::Ids ids_;
};

}  // namespace

std::unique_ptr<ChatFormat> make_chatml_format(const Tokenizer& tokenizer, std::span<const int32_t> model_stops,
                                               ChatmlFlavor flavor) {
  return std::make_unique<ChatmlFormat>(tokenizer, model_stops, flavor);
}

}  // namespace tern
