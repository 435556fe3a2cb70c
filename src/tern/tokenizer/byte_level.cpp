#include "tern/tokenizer/byte_level.h"

#include <array>

#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; the alphabet ends at U+0143

  ByteTables() {
    to_byte.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the rest are shifted to
    // U+0100.. in byte order (GPT-2's bytes_to_unicode).
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

char32_t byte_to_unicode(uint8_t byte) {
  return tables().to_unicode[byte];
}

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  const auto& t = tables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.to_byte[cp]);
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8_append(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  if (utf8_valid_prefix(text) != text.size()) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    auto b = unicode_to_byte(utf8_decode(text, pos));
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

}  // namespace tern
