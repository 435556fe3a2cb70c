#pragma once
// Test helper: the synthetic test tokenizer (Qwen3's added tokens:
// <|im_start|>, <|im_end|>, <think>, ...), built once per test binary, and
// its vocabulary without the added tokens.
#include <nlohmann/json.hpp>

#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::testing {

inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_json_text(build_synthetic_tokenizer().tokenizer_json);
  return tokenizer;
}

// The same vocabulary without any added token: no chat format's structural
// tokens, for the errors that name the missing one.
inline const Tokenizer& tokenizer_without_added_tokens() {
  static const Tokenizer tokenizer = [] {
    nlohmann::json plain = nlohmann::json::parse(build_synthetic_tokenizer().tokenizer_json);
    plain["added_tokens"] = nlohmann::json::array();
    return Tokenizer::from_json_text(plain.dump());
  }();
  return tokenizer;
}

}  // namespace tern::testing
