#include "tern/tokenizer/token_decoder.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
constexpr std::string_view kDecoderReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// The byte of a ByteFallback token "<0xXX>", as tokenizers reads it
// (u8::from_str_radix of the two characters, which also takes "+X").
std::optional<uint8_t> fallback_byte(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return std::nullopt;
  std::string_view digits = token.substr(3, 2);
  if (digits[0] == '+') digits.remove_prefix(1);
  unsigned value = 0;
  for (char c : digits) {
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      return std::nullopt;
    value = value * 16 + d;
  }
  return static_cast<uint8_t>(value);
}

// One character (valid UTF-8, one code point) from a decoder field.
std::string one_character(const nlohmann::json& config, const char* key, std::string_view type,
                          std::string_view fallback) {
  if (!config.contains(key)) return std::string(fallback);
  if (!config[key].is_string())
    fail("tokenizer decoder {} \"{}\" must be a string, got {}", type, key,
         json_excerpt(config[key]));
  std::string c = config[key].get<std::string>();
  size_t end = 0;
  if (c.empty() || utf8_valid_prefix(c) != c.size() || (utf8_decode(c, end), end != c.size()))
    fail("tokenizer decoder {} \"{}\" must be one character, got \"{}\"", type, key, printable(c));
  return c;
}

size_t count_field(const nlohmann::json& config, const char* key, std::string_view type) {
  if (!config.contains(key)) return 0;
  const auto& v = config[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail("tokenizer decoder {} \"{}\" must be a count, got {}", type, key, json_excerpt(v));
  return static_cast<size_t>(v.get<uint64_t>());
}

// Every non-overlapping occurrence of `pattern` (non-empty) replaced.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  size_t last = 0;
  for (size_t at = text.find(pattern); at != std::string_view::npos;
       at = text.find(pattern, last)) {
    out.append(text, last, at - last).append(content);
    last = at + pattern.size();
  }
  out.append(text, last, std::string_view::npos);
  return out;
}
}  // namespace

TokenDecoder TokenDecoder::from_json(const nlohmann::json& config) {
  TokenDecoder d;
  if (config.is_null()) {
    d.join_with_spaces_ = true;
    return d;
  }
  d.add_steps(config);
  return d;
}

void TokenDecoder::add_steps(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    fail("tokenizer decoder must be an object with a \"type\"");
  const std::string type = config["type"].get<std::string>();
  Step step{Step::Kind::Fuse};
  step.after_fuse = fused_;
  if (type == "Sequence") {
    const auto& list = config.contains("decoders") ? config["decoders"] : nlohmann::json();
    if (!list.is_array()) fail("tokenizer decoder Sequence needs a \"decoders\" list");
    for (const auto& d : list) add_steps(d);
    return;
  } else if (type == "Fuse") {
    fused_ = true;
  } else if (type == "ByteFallback") {
    step.kind = Step::Kind::ByteFallback;
    if (fused_) fail("unsupported tokenizer decoder: ByteFallback after Fuse");
  } else if (type == "Replace") {
    step.kind = Step::Kind::Replace;
    if (!config.contains("content") || !config["content"].is_string())
      fail("tokenizer decoder Replace needs a string \"content\"");
    step.content = config["content"].get<std::string>();
    const auto& pattern = config.contains("pattern") ? config["pattern"] : nlohmann::json();
    if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      step.pattern = pattern["String"].get<std::string>();
      if (step.pattern.empty()) fail("tokenizer decoder Replace has an empty pattern");
      size_t end = 0;
      // After Fuse the text arrives in pieces: only a one-character pattern
      // cannot straddle two of them.
      if (fused_ && (utf8_decode(step.pattern, end), end != step.pattern.size()))
        fail(
            "unsupported tokenizer decoder: Replace of a pattern longer than one character after "
            "Fuse");
    } else if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      if (fused_) fail("unsupported tokenizer decoder: Replace with a Regex pattern after Fuse");
      regexes_.push_back(std::make_shared<const Regex>(pattern["Regex"].get<std::string>()));
      step.regex = regexes_.back().get();
    } else {
      fail(
          "tokenizer decoder Replace pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, "
          "got {}",
          json_excerpt(pattern));
    }
  } else if (type == "Strip") {
    step.kind = Step::Kind::Strip;
    step.pattern = one_character(config, "content", type, " ");
    step.start = count_field(config, "start", type);
    step.stop = count_field(config, "stop", type);
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::Metaspace;
    step.pattern = one_character(config, "replacement", type, "\u2581");
    const std::string scheme = config.value("prepend_scheme", std::string("always"));
    if (scheme != "always" && scheme != "first" && scheme != "never")
      fail("unsupported Metaspace prepend_scheme \"{}\" (supported: always, first, never)",
           printable(scheme));
    if (config.contains("add_prefix_space") && config["add_prefix_space"].is_boolean() &&
        !config["add_prefix_space"].get<bool>() && scheme != "never")
      fail("tokenizer Metaspace add_prefix_space false does not match its prepend_scheme \"{}\"",
           scheme);
    step.first_drops = scheme != "never";
  } else {
    fail(
        "unsupported tokenizer decoder type \"{}\" (supported: Replace, ByteFallback, Fuse, Strip, "
        "Metaspace, "
        "Sequence; ByteLevel with a ByteLevel pre_tokenizer)",
        printable(type));
  }
  steps_.push_back(std::move(step));
}

TokenDecoder::State TokenDecoder::start(bool continuation) const {
  State state;
  state.steps.resize(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].kind == Step::Kind::Strip && steps_[i].after_fuse && !continuation)
      state.steps[i].strip_left = steps_[i].start;
    if (continuation) state.steps[i].tokens = 1;  // the first token is not the text's first
  }
  if (continuation) state.tokens_out = 1;
  return state;
}

void TokenDecoder::emit(State& state, std::string_view text, std::string& out) const {
  if (join_with_spaces_ && state.tokens_out++ > 0) out += ' ';
  out.append(text);
}

std::string TokenDecoder::replaced(const Step& step, std::string_view text) {
  if (!step.regex) return replace_all(text, step.pattern, step.content);
  std::vector<ByteRange> matches;
  step.regex->find_all(text, matches);
  std::string out;
  size_t last = 0;
  for (const ByteRange& m : matches) {
    out.append(text, last, m.begin - last).append(step.content);
    last = m.end;
  }
  return out.append(text, last, std::string_view::npos);
}

// The byte run held by ByteFallback step i ends (a token that is no byte, or
// the end of the text): valid UTF-8 goes on as one token, else every byte of
// the run becomes one U+FFFD token, as tokenizers does.
void TokenDecoder::release_run(State& state, size_t i, std::string& out) const {
  std::string run;
  run.swap(state.steps[i].bytes);
  if (run.empty()) return;
  if (utf8_valid_prefix(run) == run.size()) {
    feed(state, i + 1, std::move(run), out);
    return;
  }
  for (size_t k = 0; k < run.size(); ++k)
    feed(state, i + 1, std::string(kDecoderReplacementChar), out);
}

// Runs `token` through steps [i, end). A step may hold the token back
// (ByteFallback's byte runs, Strip's trailing characters) or release held
// text before it.
void TokenDecoder::feed(State& state, size_t i, std::string token, std::string& out) const {
  for (; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    State::StepState& s = state.steps[i];
    switch (step.kind) {
      case Step::Kind::Fuse:
        break;
      case Step::Kind::Replace:
        token = replaced(step, token);
        break;
      case Step::Kind::Metaspace: {
        // tokenizers drops every replacement character of the first token
        // (after Fuse the whole text is that token), else they are spaces.
        const bool first = step.after_fuse || s.tokens++ == 0;
        token = replace_all(token, step.pattern, first && step.first_drops ? "" : " ");
        break;
      }
      case Step::Kind::ByteFallback: {
        if (auto byte = fallback_byte(token)) {
          s.bytes += static_cast<char>(*byte);
          return;
        }
        release_run(state, i, out);
        break;
      }
      case Step::Kind::Strip: {
        const std::string_view c = step.pattern;
        if (!step.after_fuse) {
          size_t begin = 0, end = token.size();
          for (size_t k = 0; k < step.start && token.compare(begin, c.size(), c) == 0; ++k)
            begin += c.size();
          for (size_t k = 0; k < step.stop && end >= begin + c.size() &&
                             token.compare(end - c.size(), c.size(), c) == 0;
               ++k)
            end -= c.size();
          token = token.substr(begin, end - begin);
          break;
        }
        // One text arriving in pieces: drop up to `start` characters at its
        // beginning, hold back up to `stop` at its current end.
        size_t cut = 0;
        while (s.strip_left > 0 && token.compare(cut, c.size(), c) == 0) {
          cut += c.size();
          --s.strip_left;
        }
        if (cut < token.size()) s.strip_left = 0;
        token.erase(0, cut);
        if (step.stop > 0) {
          std::string text = s.held + token;
          size_t end = text.size();
          for (size_t k = 0;
               k < step.stop && end >= c.size() && text.compare(end - c.size(), c.size(), c) == 0;
               ++k)
            end -= c.size();
          s.held = text.substr(end);
          text.resize(end);
          token = std::move(text);
        }
        if (token.empty()) return;
        break;
      }
    }
  }
  emit(state, token, out);
}

void TokenDecoder::push(State& state, std::string_view token, std::string& out) const {
  feed(state, 0, std::string(token), out);
}

void TokenDecoder::flush(State& state, std::string& out) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    State::StepState& s = state.steps[i];
    if (steps_[i].kind == Step::Kind::ByteFallback) release_run(state, i, out);
    if (steps_[i].kind == Step::Kind::Strip)
      s.held.clear();  // trailing characters at the end: stripped
  }
}

size_t TokenDecoder::pending_bytes(const State& state) const {
  size_t n = 0;
  for (const State::StepState& s : state.steps) n += s.bytes.size() + s.held.size();
  return n;
}

std::string TokenDecoder::piece(std::string_view token) const {
  std::string text(token);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::ByteFallback:
        if (auto byte = fallback_byte(text)) return std::string(1, static_cast<char>(*byte));
        break;
      case Step::Kind::Replace:
        text = replaced(step, text);
        break;
      case Step::Kind::Metaspace:
        text = replace_all(text, step.pattern, step.after_fuse && step.first_drops ? "" : " ");
        break;
      case Step::Kind::Fuse:
      case Step::Kind::Strip:
        break;
    }
  }
  return text;
}

}  // namespace tern
