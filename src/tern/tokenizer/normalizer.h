#pragma once
// Normalizer — the tokenizer.json "normalizer" stage: a sequence of Unicode
// normalization forms (NFC/NFD/NFKC/NFKD via utf8proc), or nothing.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace tern {

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  // Parses the "normalizer" value (null, one of the forms, or a Sequence of
  // them). Other types throw tern::Error naming the type.
  static Normalizer from_json(const nlohmann::json& config);

  bool is_identity() const { return forms_.empty(); }
  // Normalizes valid UTF-8 `text` into `out` (replacing its contents).
  void apply(std::string_view text, std::string& out) const;

 private:
  std::vector<Form> forms_;
};

}  // namespace tern
