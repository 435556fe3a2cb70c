#pragma once
// The GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable
// Unicode character (bytes_to_unicode), so a vocabulary of strings can cover
// arbitrary bytes. Byte-level BPE vocabularies (Qwen, Llama 3, GPT-OSS,
// DeepSeek) store their tokens in this alphabet.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

// The code point that stands for `byte` (e.g. 0x20 ' ' -> U+0120 'Ġ').
char32_t byte_to_unicode(uint8_t byte);
// Inverse of byte_to_unicode; nullopt for characters outside the alphabet.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// Raw bytes -> byte-level string (UTF-8 of the mapped characters).
std::string bytes_to_byte_level(std::string_view bytes);
// Byte-level string -> raw bytes; nullopt if `text` is not valid UTF-8 or has
// a character outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace tern
