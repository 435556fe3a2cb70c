#include "tern/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/json.h"

namespace tern {

namespace {
bool is_ascii(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::string string_field(const nlohmann::json& config, const char* key, std::string_view type) {
  if (!config.contains(key) || !config[key].is_string())
    fail("tokenizer normalizer {} needs a string \"{}\", got {}", type, key,
         config.contains(key) ? json_excerpt(config[key]) : std::string("nothing"));
  return config[key].get<std::string>();
}
}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer n;
  n.add_steps(config);
  return n;
}

void Normalizer::add_steps(const nlohmann::json& config) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    fail("tokenizer normalizer must be an object with a \"type\"");
  const std::string type = config.at("type").get<std::string>();
  const Form forms[] = {Form::NFC, Form::NFD, Form::NFKC, Form::NFKD};
  const char* form_names[] = {"NFC", "NFD", "NFKC", "NFKD"};
  for (int i = 0; i < 4; ++i)
    if (type == form_names[i]) {
      steps_.push_back({Step::Kind::Unicode, forms[i]});
      return;
    }
  if (type == "Sequence") {
    const auto& list = config.contains("normalizers") ? config["normalizers"] : nlohmann::json();
    if (!list.is_array()) fail("tokenizer normalizer Sequence needs a \"normalizers\" list");
    for (const auto& step : list) add_steps(step);
  } else if (type == "Prepend") {
    steps_.push_back({Step::Kind::Prepend, Form::NFC, string_field(config, "prepend", type)});
  } else if (type == "Replace") {
    Step step{Step::Kind::Replace, Form::NFC, string_field(config, "content", type)};
    const auto& pattern = config.contains("pattern") ? config["pattern"] : nlohmann::json();
    if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      step.literal = pattern["String"].get<std::string>();
      if (step.literal.empty()) fail("tokenizer normalizer Replace has an empty pattern");
    } else if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      regexes_.push_back(std::make_shared<const Regex>(pattern["Regex"].get<std::string>()));
      step.regex = regexes_.back().get();
    } else {
      fail("tokenizer normalizer Replace pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}",
           json_excerpt(pattern));
    }
    steps_.push_back(std::move(step));
  } else {
    fail(
        "unsupported tokenizer normalizer type \"{}\" (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, "
        "Sequence)",
        printable(type));
  }
}

void Normalizer::apply_form(Form form, std::string& text) {
  // ASCII is invariant under every normalization form; most text is ASCII.
  if (is_ascii(text)) return;
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Form::NFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case Form::NFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case Form::NFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case Form::NFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &result,
                                    static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (n < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(n));
  text.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

void Normalizer::apply(std::string_view text, std::string& out) const {
  out.assign(text);
  if (steps_.empty()) return;
  thread_local std::vector<ByteRange> matches;
  thread_local std::string replaced;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::Unicode:
        apply_form(step.form, out);
        break;
      case Step::Kind::Prepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Step::Kind::Replace: {
        // Non-overlapping matches, left to right, as tokenizers' NormalizedString::replace.
        matches.clear();
        if (step.regex) {
          step.regex->find_all(out, matches);
        } else {
          for (size_t at = out.find(step.literal); at != std::string::npos;
               at = out.find(step.literal, at + step.literal.size()))
            matches.push_back({at, at + step.literal.size()});
        }
        if (matches.empty()) break;
        replaced.clear();
        size_t last = 0;
        for (const ByteRange& m : matches) {
          replaced.append(out, last, m.begin - last).append(step.text);
          last = m.end;
        }
        replaced.append(out, last, std::string::npos);
        out.swap(replaced);
        break;
      }
    }
  }
}

}  // namespace tern
