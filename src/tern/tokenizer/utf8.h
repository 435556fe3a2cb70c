#pragma once
// UTF-8 helpers shared by the tokenizer: validation with the offending byte
// offset, code point decoding, and the Unicode White_Space property (which
// the Rust `tokenizers` crate uses for lstrip/rstrip and `\s`).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// Length of the longest prefix of `text` that is well-formed UTF-8 (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF). Equals text.size()
// when the whole text is valid.
size_t utf8_valid_prefix(std::string_view text);

// Decodes one code point at `pos` of valid UTF-8; advances pos.
char32_t utf8_decode(std::string_view text, size_t& pos);
// Decodes the code point that ends just before `end` (valid UTF-8).
char32_t utf8_decode_before(std::string_view text, size_t end);
void utf8_append(std::string& out, char32_t cp);

// Unicode White_Space (the set Rust's char::is_whitespace and Oniguruma's \s use).
bool is_unicode_white_space(char32_t cp);

}  // namespace tern
