#include "tern/tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}
}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& t : tokens)
    if (!t.content.empty()) tokens_.push_back(t);
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  first_byte_.fill(false);
  for (const AddedToken& t : tokens_) first_byte_[static_cast<uint8_t>(t.content[0])] = true;
}

void AddedTokenMatcher::split(std::string_view text, bool allow_special,
                              std::vector<TextSegment>& out) const {
  out.clear();
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    const AddedToken* match = nullptr;
    for (const AddedToken& t : tokens_) {
      if (t.special && !allow_special) continue;
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word) {
        size_t end = i + t.content.size();
        if (i > 0 && is_word_char(utf8_decode_before(text, i))) continue;
        if (end < text.size()) {
          size_t pos = end;
          if (is_word_char(utf8_decode(text, pos))) continue;
        }
      }
      match = &t;
      break;
    }
    if (!match) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + match->content.size();
    if (match->lstrip)
      while (begin > plain_begin && is_unicode_white_space(utf8_decode_before(text, begin))) {
        size_t cp_start = begin - 1;
        while ((static_cast<uint8_t>(text[cp_start]) & 0xC0) == 0x80) --cp_start;
        begin = cp_start;
      }
    if (match->rstrip)
      while (end < text.size()) {
        size_t pos = end;
        if (!is_unicode_white_space(utf8_decode(text, pos))) break;
        end = pos;
      }
    if (begin > plain_begin) out.push_back({plain_begin, begin, -1});
    out.push_back({begin, end, match->id});
    plain_begin = i = end;
  }
  if (plain_begin < text.size()) out.push_back({plain_begin, text.size(), -1});
}

}  // namespace tern
