#include "tern/server/openai_api.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "tern/tokenizer/tokenizer.h"

namespace tern {

using json = nlohmann::ordered_json;

json ApiError::body() const { return error_body(what(), type_, param_, code_); }

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "a number";
    default: return "an unsupported value";
  }
}

// Field accessors: absent or null means "not given".
const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const json& o, const char* name, double lo, double hi) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number, not {}", name, type_name(*v)));
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) bad(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, d));
  return d;
}

std::optional<int64_t> integer(const json& o, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
                                   std::abs(v->get<double>()) < 9e15))
    bad(name, fmt::format("'{}' must be an integer, not {}", name, type_name(*v)));
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : (v->is_number_integer() ? v->get<int64_t>() : static_cast<int64_t>(v->get<double>()));
  if (i < lo || i > hi) bad(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, i));
  return i;
}

std::optional<bool> boolean(const json& o, const char* name) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, fmt::format("'{}' must be a boolean, not {}", name, type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> string(const json& o, const char* name) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(name, fmt::format("'{}' must be a string, not {}", name, type_name(*v)));
  return v->get<std::string>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& v, const std::string& where) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(where, fmt::format("'{}' must be a string or an array of text parts, not {}", where, type_name(v)));
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string p = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) bad(p, fmt::format("'{}' must be an object", p));
    auto type = string(part, "type");
    if (type.value_or("text") != "text")
      bad(p, fmt::format("'{}' has type '{}'; this model takes text only", p, type.value_or("")));
    const json* text = field(part, "text");
    if (!text || !text->is_string()) bad(p, fmt::format("'{}.text' must be a string", p));
    out += text->get<std::string>();
  }
  return out;
}

std::vector<ToolDefinition> parse_tools(const json& body) {
  std::vector<ToolDefinition> tools;
  const json* v = field(body, "tools");
  if (!v) return tools;
  if (!v->is_array()) bad("tools", fmt::format("'tools' must be an array, not {}", type_name(*v)));
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad(p, fmt::format("'{}' must be an object", p));
    if (string(t, "type").value_or("function") != "function")
      bad(p, fmt::format("'{}.type' must be \"function\"", p));
    const json* f = field(t, "function");
    if (!f || !f->is_object()) bad(p, fmt::format("'{}.function' must be an object", p));
    ToolDefinition d;
    const json* name = field(*f, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty())
      bad(p, fmt::format("'{}.function.name' must be a non-empty string", p));
    d.name = name->get<std::string>();
    if (const json* desc = field(*f, "description")) {
      if (!desc->is_string()) bad(p, fmt::format("'{}.function.description' must be a string", p));
      d.description = desc->get<std::string>();
    }
    if (const json* params = field(*f, "parameters")) {
      if (!params->is_object()) bad(p, fmt::format("'{}.function.parameters' must be an object (a JSON Schema)", p));
      d.parameters = params->dump();
    }
    d.json = t.dump();
    tools.push_back(std::move(d));
  }
  return tools;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) bad("messages", "'messages' is required");
  if (!v->is_array()) bad("messages", fmt::format("'messages' must be an array, not {}", type_name(*v)));
  if (v->empty()) bad("messages", "'messages' must hold at least one message");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(p, fmt::format("'{}' must be an object, not {}", p, type_name(m)));
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad(p, fmt::format("'{}.role' must be a string", p));
    ChatMessage msg{role->get<std::string>(), ""};
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (std::find(std::begin(kRoles), std::end(kRoles), msg.role) == std::end(kRoles))
      bad(p, fmt::format("'{}.role' is '{}'; expected system, developer, user, assistant or tool", p, msg.role));
    auto c = m.find("content");
    if (c != m.end()) msg.content = content_text(*c, p + ".content");
    else if (msg.role != "assistant") bad(p, fmt::format("'{}.content' is required", p));
    for (const char* key : {"reasoning_content", "reasoning"})
      if (const json* r = field(m, key)) {
        if (!r->is_string()) bad(p, fmt::format("'{}.{}' must be a string", p, key));
        msg.reasoning = r->get<std::string>();
      }
    if (const json* calls = field(m, "tool_calls")) {
      if (msg.role != "assistant") bad(p, fmt::format("'{}.tool_calls' is only for assistant messages", p));
      if (!calls->is_array()) bad(p, fmt::format("'{}.tool_calls' must be an array", p));
      for (size_t j = 0; j < calls->size(); ++j) {
        const json& call = (*calls)[j];
        const std::string q = fmt::format("{}.tool_calls[{}]", p, j);
        const json* f = call.is_object() ? field(call, "function") : nullptr;
        if (!f || !f->is_object()) bad(q, fmt::format("'{}.function' must be an object", q));
        const json* name = field(*f, "name");
        if (!name || !name->is_string()) bad(q, fmt::format("'{}.function.name' must be a string", q));
        ToolCall tc{name->get<std::string>(), "{}"};
        if (const json* args = field(*f, "arguments")) {
          if (args->is_string()) tc.arguments = args->get<std::string>();
          else if (args->is_object()) tc.arguments = args->dump();
          else bad(q, fmt::format("'{}.function.arguments' must be a string of JSON", q));
        }
        msg.tool_calls.push_back(std::move(tc));
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::vector<std::string> parse_stop(const json& body) {
  std::vector<std::string> stops;
  const json* v = field(body, "stop");
  if (!v) return stops;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) stops.push_back(v->get<std::string>());
    return stops;
  }
  if (!v->is_array()) bad("stop", fmt::format("'stop' must be a string or an array of strings, not {}", type_name(*v)));
  if (v->size() > 16) bad("stop", "'stop' holds at most 16 strings");
  for (const auto& s : *v) {
    if (!s.is_string()) bad("stop", "'stop' must hold strings only");
    if (!s.get<std::string>().empty()) stops.push_back(s.get<std::string>());
  }
  return stops;
}

void parse_common(const json& body, const SamplerOptions& defaults, CompletionRequest& r) {
  if (!body.is_object()) bad("", fmt::format("the request body must be a JSON object, not {}", type_name(body)));
  r.model = string(body, "model").value_or("");
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  r.max_tokens = integer(body, "max_completion_tokens", 1, INT64_MAX);
  if (!r.max_tokens) r.max_tokens = integer(body, "max_tokens", 1, INT64_MAX);
  if (auto n = integer(body, "n", 1, 128); n && *n != 1) bad("n", "'n' must be 1 (one choice per request)");
  r.stop = parse_stop(body);
  r.sampling = defaults;
  if (auto t = number(body, "temperature", 0, 2)) {
    r.sampling.temperature = static_cast<float>(*t);
    r.sampling.greedy = *t == 0;
  }
  if (auto p = number(body, "top_p", 0, 1)) {
    if (*p == 0) bad("top_p", "'top_p' must be greater than 0");
    r.sampling.top_p = static_cast<float>(*p);
  }
  if (auto k = integer(body, "top_k", 0, 1 << 30)) r.sampling.top_k = *k;            // llama.cpp / vLLM extension
  if (auto p = number(body, "min_p", 0, 0.999999)) r.sampling.min_p = static_cast<float>(*p);  // extension
  if (auto p = number(body, "repetition_penalty", 0.01, 10)) r.sampling.repetition_penalty = static_cast<float>(*p);
  if (auto p = number(body, "presence_penalty", -2, 2)) r.sampling.presence_penalty = static_cast<float>(*p);
  if (auto p = number(body, "frequency_penalty", -2, 2)) r.sampling.frequency_penalty = static_cast<float>(*p);
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer()) bad("seed", fmt::format("'seed' must be an integer, not {}", type_name(*s)));
    r.sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
    r.seeded = true;
  } else {
    r.sampling.seed = std::random_device{}();
  }
  if (boolean(body, "logprobs").value_or(false)) bad("logprobs", "'logprobs' is not supported");
  r.return_tokens = boolean(body, "return_tokens").value_or(false);
  r.cache_prompt = boolean(body, "cache_prompt").value_or(true);
}

}  // namespace

CompletionRequest parse_chat_request(const json& body, const SamplerOptions& defaults) {
  CompletionRequest r;
  r.chat = true;
  parse_common(body, defaults, r);
  r.messages = parse_messages(body);
  r.format.tools = parse_tools(body);
  if (const json* choice = field(body, "tool_choice")) {
    std::string mode;
    if (choice->is_string()) {
      mode = choice->get<std::string>();
      if (mode != "auto" && mode != "none" && mode != "required")
        bad("tool_choice", fmt::format("'tool_choice' is '{}'; expected auto, none, required or a function", mode));
    } else if (choice->is_object()) {
      const json* f = field(*choice, "function");
      const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
      if (!name || !name->is_string()) bad("tool_choice", "'tool_choice.function.name' must be a string");
      const std::string n = name->get<std::string>();
      if (std::none_of(r.format.tools.begin(), r.format.tools.end(), [&](const ToolDefinition& t) { return t.name == n; }))
        bad("tool_choice", fmt::format("'tool_choice' names '{}', which is not in 'tools'", n));
      // Only that function is offered, so the model can call no other.
      std::erase_if(r.format.tools, [&](const ToolDefinition& t) { return t.name != n; });
    } else {
      bad("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (mode == "none") r.format.tools.clear();
  }
  // Reasoning controls: OpenAI's reasoning_effort (harmony), and the
  // chat_template_kwargs.enable_thinking that vLLM and llama.cpp take for Qwen3.
  if (auto effort = string(body, "reasoning_effort")) {
    if (*effort != "low" && *effort != "medium" && *effort != "high")
      bad("reasoning_effort", fmt::format("'reasoning_effort' is '{}'; expected low, medium or high", *effort));
    r.format.reasoning_effort = *effort;
  }
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (auto t = boolean(*kw, "enable_thinking")) r.format.enable_thinking = *t;
  }
  return r;
}

CompletionRequest parse_completion_request(const json& body, const SamplerOptions& defaults) {
  CompletionRequest r;
  r.chat = false;
  parse_common(body, defaults, r);
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  auto token_list = [&](const json& a) {
    std::vector<int32_t> ids;
    for (const auto& t : a) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        bad("prompt", "a token-id prompt must hold non-negative integers");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return ids;
  };
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompt_tokens = token_list(*p);
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
    r.prompt_tokens = token_list((*p)[0]);
  } else {
    bad("prompt", "'prompt' must be a string, an array of token ids, or an array holding one of them");
  }
  if (r.prompt.empty() && r.prompt_tokens.empty()) bad("prompt", "'prompt' is empty");
  r.echo = boolean(body, "echo").value_or(false);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  if (const json* s = field(body, "suffix"); s) bad("suffix", "'suffix' is not supported");
  return r;
}

ReplyAssembler::ReplyAssembler(const Tokenizer& tokenizer, const ChatFormat* format, const ChatFormatOptions& options,
                               std::vector<std::string> stops, std::vector<int32_t> stop_tokens)
    : stops_(std::move(stops)), stop_tokens_(std::move(stop_tokens)) {
  if (format) parser_ = format->make_parser(options);
  else decoder_ = std::make_unique<StreamDecoder>(tokenizer, /*continuation=*/true);  // a completion continues its prompt
}

void ReplyAssembler::add(ReplyDelta d, std::vector<ReplyDelta>& out) {
  content_ += d.content;
  reasoning_ += d.reasoning;
  if (d.tool_call) tool_calls_.push_back(*d.tool_call);
  out.push_back(std::move(d));
}

void ReplyAssembler::add_content(const std::string& text, std::vector<ReplyDelta>& out) {
  if (stop_matched_ || text.empty()) return;
  held_ += text;
  // The earliest stop string in the held text ends the answer there.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stop_matched_ = true;
    if (first > 0) add({held_.substr(0, first), {}, std::nullopt}, out);
    held_.clear();
    return;
  }
  // Hold back the longest tail that begins some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  if (held_.size() > hold) {
    add({held_.substr(0, held_.size() - hold), {}, std::nullopt}, out);
    held_.erase(0, held_.size() - hold);
  }
}

bool ReplyAssembler::push(int32_t id, std::vector<ReplyDelta>& out) {
  if (ended_ || stop_matched_) return false;
  if (parser_) {
    for (ChatEvent& e : parser_->push(id)) {
      switch (e.kind) {
        case ChatEvent::Kind::Reasoning: add({{}, std::move(e.text), std::nullopt}, out); break;
        case ChatEvent::Kind::Content: add_content(e.text, out); break;
        case ChatEvent::Kind::ToolCall: add({{}, {}, ToolCall{std::move(e.name), std::move(e.text)}}, out); break;
        case ChatEvent::Kind::End: break;
      }
      if (stop_matched_) break;
    }
    if (parser_->done()) ended_ = true;
  } else {
    if (std::find(stop_tokens_.begin(), stop_tokens_.end(), id) != stop_tokens_.end()) {
      ended_ = true;
    } else {
      add_content(decoder_->push(id), out);
    }
  }
  return !ended_ && !stop_matched_;
}

void ReplyAssembler::finish(std::vector<ReplyDelta>& out) {
  if (parser_) {
    for (ChatEvent& e : parser_->finish()) {
      if (e.kind == ChatEvent::Kind::Content) add_content(e.text, out);
      else if (e.kind == ChatEvent::Kind::Reasoning) add({{}, std::move(e.text), std::nullopt}, out);
      else if (e.kind == ChatEvent::Kind::ToolCall) add({{}, {}, ToolCall{std::move(e.name), std::move(e.text)}}, out);
    }
  } else if (!ended_) {
    add_content(decoder_->flush(), out);
  }
  if (!stop_matched_ && !held_.empty()) add({std::exchange(held_, {}), {}, std::nullopt}, out);
}

std::string finish_reason_name(bool length, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  return length ? "length" : "stop";
}

}  // namespace tern
