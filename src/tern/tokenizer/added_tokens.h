#pragma once
// AddedTokens — the tokenizer.json "added_tokens" (chat markers such as
// <|im_start|>, <think>) and the matcher that finds them in raw text before
// normalization and pre-tokenization, so they are never split by BPE.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // control token; can be disabled with allow_special=false
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // informational: Tern matches every added token in the raw text
};

// One piece of input: an added token, or a run of plain text to tokenize.
struct TextSegment {
  size_t begin = 0, end = 0;  // byte range in the input
  int32_t token_id = -1;      // the added token's id; -1 for plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits valid UTF-8 `text` at added tokens: at each position the longest
  // token that matches wins (leftmost-longest, as tokenizers' Aho-Corasick).
  // With allow_special=false, special tokens are left in the plain text.
  void split(std::string_view text, bool allow_special, std::vector<TextSegment>& out) const;

 private:
  std::vector<AddedToken> tokens_;  // sorted longest first, so the first match is the longest
  std::array<bool, 256> first_byte_{};
};

}  // namespace tern
