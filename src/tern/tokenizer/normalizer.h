#pragma once
// Normalizer — the tokenizer.json "normalizer" stage: a sequence of Unicode
// normalization forms (NFC/NFD/NFKC/NFKD via utf8proc), Prepend (the legacy
// SentencePiece "▁" before each piece of text) and Replace (a literal or
// regex pattern, e.g. " " -> "▁"), or nothing.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/regex.h"

namespace tern {

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  // Parses the "normalizer" value (null, one of the supported types, or a
  // Sequence of them). Other types throw tern::Error naming the type.
  static Normalizer from_json(const nlohmann::json& config);

  bool is_identity() const { return steps_.empty(); }
  // Normalizes valid UTF-8 `text` into `out` (replacing its contents). As in
  // tokenizers, Prepend leaves empty text empty.
  void apply(std::string_view text, std::string& out) const;

 private:
  struct Step {
    enum class Kind { Unicode, Prepend, Replace } kind;
    Form form = Form::NFC;          // Unicode
    std::string text{};             // Prepend: the prefix; Replace: the replacement
    std::string literal{};          // Replace {"String": ...}: the pattern
    const Regex* regex = nullptr;   // Replace {"Regex": ...} (points into regexes_)
  };
  void add_steps(const nlohmann::json& config);
  static void apply_form(Form form, std::string& text);

  std::vector<Step> steps_;
  std::vector<std::shared_ptr<const Regex>> regexes_;  // stable addresses for Step::regex
};

}  // namespace tern
