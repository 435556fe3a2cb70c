#include "tern/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tern/core/error.h"
#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
// Unicode White_Space as a PCRE2 class body.
constexpr std::string_view kWhiteSpaceClass =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{"
    "205F}"
    "\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}
}  // namespace

std::string translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpaceClass;
        } else {
          out += '[';
          out += kWhiteSpaceClass;
          out += ']';
        }
      } else if (e == 'S' && !in_class) {
        out += "[^";
        out += kWhiteSpaceClass;
        out += ']';
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:alpha:]
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, bool literal)
    : pattern_(pattern), code_(std::make_unique<Code>()) {
  std::string compiled = literal ? std::string(pattern) : translate_oniguruma_pattern(pattern);
  // PCRE2 refuses UCP together with LITERAL; a literal has no classes anyway.
  uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                              options, &error, &error_offset, nullptr);
  if (!code_->code)
    fail("cannot compile tokenizer regex /{}/ at offset {}: {}", printable(pattern_), error_offset,
         pcre2_message(error));
  // JIT is 3-10x faster for these patterns; without it (unsupported CPU or
  // a PCRE2 built without JIT) the interpreter gives the same matches.
  jit_ = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view subject, std::vector<ByteRange>& matches) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!data) fail("out of memory allocating regex match data");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t offset = 0;
  // The subject was validated once up front; skip PCRE2's per-call check,
  // which would otherwise rescan the whole subject at every match.
  uint32_t options = PCRE2_NO_UTF_CHECK;
  while (offset < subject.size()) {
    int rc = pcre2_match(code_->code, s, subject.size(), offset, options, data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Very long runs can exhaust the JIT's default 32 KiB stack; the
      // interpreter keeps its backtracking state on the heap.
      options |= PCRE2_NO_JIT;
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      fail("tokenizer regex /{}/ failed at byte {}: {}", printable(pattern_), offset, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    size_t begin = ov[0], end = ov[1];
    if (end == begin) {
      // Step over one whole character so the next search starts on a boundary.
      size_t pos = begin;
      if (pos >= subject.size()) break;
      utf8_decode(subject, pos);
      offset = pos;
      continue;
    }
    matches.push_back({begin, end});
    offset = end;
  }
}

}  // namespace tern
