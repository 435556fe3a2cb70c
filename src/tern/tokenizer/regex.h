#pragma once
// Regex — a compiled PCRE2 pattern (UTF + UCP, JIT when available) for the
// tokenizer's Split pre-tokenizers. Immutable after construction and safe to
// share between threads: each call allocates its own match data.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct ByteRange {
  size_t begin = 0, end = 0;
};

class Regex {
 public:
  // `pattern` is in the Oniguruma dialect tokenizer.json files are written
  // for (see translate_oniguruma_pattern); `literal` compiles it verbatim as
  // a plain string (the Split {"String": ...} form).
  explicit Regex(std::string_view pattern, bool literal = false);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Appends the non-overlapping matches in `subject` (valid UTF-8), left to
  // right, as byte ranges relative to subject. Empty matches are skipped.
  void find_all(std::string_view subject, std::vector<ByteRange>& matches) const;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
  bool jit_ = false;
};

// Rewrites the constructs where Oniguruma (used by the Rust `tokenizers`
// crate) and PCRE2 disagree: `\s`/`\S` mean Unicode White_Space in
// Oniguruma, which includes U+0085 (NEL) that PCRE2's UCP `\s` lacks.
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace tern
