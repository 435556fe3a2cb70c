#include "tern/tokenizer/stream_decoder.h"

#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes a sequence led by `lead` needs; 0 if `lead` cannot start one.
int expected_length(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// How many bytes of `s` (starting at a non-ASCII lead byte) are a valid,
// possibly incomplete, prefix of one sequence. 0 means the lead itself is
// invalid. Follows Unicode's "maximal subpart" rule so one U+FFFD replaces
// each maximal invalid prefix, the same as Python's and JavaScript's decoders.
size_t valid_subpart(std::string_view s, int& needed) {
  auto lead = static_cast<uint8_t>(s[0]);
  needed = expected_length(lead);
  if (needed == 0) return 0;
  size_t k = 1;
  for (; k < static_cast<size_t>(needed) && k < s.size(); ++k) {
    auto b = static_cast<uint8_t>(s[k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) break;
  }
  return k;
}
}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool continuation) : tokenizer_(&tokenizer) {
  if (!tokenizer.is_byte_level()) chain_ = tokenizer.token_decoder().start(continuation);
}

std::string StreamDecoder::push(int32_t id) {
  if (tokenizer_->is_byte_level()) return push_bytes(tokenizer_->token_piece(id));
  std::string out;
  tokenizer_->token_decoder().push(chain_, tokenizer_->decoder_token(id), out);
  return out;
}

size_t StreamDecoder::pending_bytes() const {
  return pending_.size() + (tokenizer_->is_byte_level() ? 0 : tokenizer_->token_decoder().pending_bytes(chain_));
}

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    auto b = static_cast<uint8_t>(pending_[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    int needed = 0;
    size_t valid = valid_subpart(std::string_view(pending_).substr(i), needed);
    if (valid == 0) {  // stray continuation byte or impossible lead
      out += kReplacement;
      ++i;
    } else if (valid == static_cast<size_t>(needed)) {
      out.append(pending_, i, valid);
      i += valid;
    } else if (i + valid == pending_.size()) {
      break;  // a valid prefix that more bytes may complete: hold it back
    } else {
      out += kReplacement;  // the next byte proved this prefix can never complete
      i += valid;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = std::string(kReplacement);
  pending_.clear();
  if (!tokenizer_->is_byte_level()) tokenizer_->token_decoder().flush(chain_, out);
  return out;
}

}  // namespace tern
