#include "tern/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"

namespace tern {

namespace {
void add_forms(const nlohmann::json& config, std::vector<Normalizer::Form>& forms) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type"))
    fail("tokenizer normalizer must be an object with a \"type\"");
  const std::string type = config.at("type").get<std::string>();
  if (type == "NFC") {
    forms.push_back(Normalizer::Form::NFC);
  } else if (type == "NFD") {
    forms.push_back(Normalizer::Form::NFD);
  } else if (type == "NFKC") {
    forms.push_back(Normalizer::Form::NFKC);
  } else if (type == "NFKD") {
    forms.push_back(Normalizer::Form::NFKD);
  } else if (type == "Sequence") {
    for (const auto& step : config.at("normalizers")) add_forms(step, forms);
  } else {
    fail("unsupported tokenizer normalizer type \"{}\" (supported: NFC, NFD, NFKC, NFKD, Sequence)",
         printable(type));
  }
}

bool is_ascii(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}
}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer n;
  add_forms(config, n.forms_);
  return n;
}

void Normalizer::apply(std::string_view text, std::string& out) const {
  out.assign(text);
  // ASCII is invariant under every normalization form; most text is ASCII.
  if (forms_.empty() || is_ascii(text)) return;
  for (Form form : forms_) {
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
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out.data()),
                                      static_cast<utf8proc_ssize_t>(out.size()), &result,
                                      static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
    if (n < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(n));
    out.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  }
}

}  // namespace tern
