#pragma once
// tern::Error — the one error type of the library. Its message carries the
// context a user needs to act (file, tensor, offset, what was expected).
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tern {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws tern::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Overflow-checked arithmetic for sizes and offsets read from files.
inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("integer overflow computing {}", what);
  return r;
}
inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("integer overflow computing {}", what);
  return r;
}

// A string from a file made safe for a one-line error message: control
// characters escaped (\n, \xNN), cut to about max_chars with "...".
inline std::string printable(std::string_view text, size_t max_chars = 120) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (out.size() >= max_chars && (u & 0xC0) != 0x80) {  // cut between characters
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

inline uint64_t round_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace tern
