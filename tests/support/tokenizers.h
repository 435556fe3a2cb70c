#pragma once
// Test helper: the synthetic test tokenizer (Qwen3's added tokens:
// <|im_start|>, <|im_end|>, <think>, ...), built once per test binary.
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::testing {

inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_json_text(build_synthetic_tokenizer().tokenizer_json);
  return tokenizer;
}

}  // namespace tern::testing
