#pragma once
// StreamDecoder — turns token ids arriving one at a time into text that is
// always whole UTF-8: bytes of a character split across tokens are held back
// until it completes, and bytes that can never form a character become
// U+FFFD as soon as that is certain (so output never stalls on garbage).
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

class Tokenizer;

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Adds one token; returns the text that is now complete (maybe empty).
  std::string push(int32_t id);
  // Adds raw bytes (for callers that already hold token bytes).
  std::string push_bytes(std::string_view bytes);
  // Ends the stream: whatever is held back is incomplete and becomes U+FFFD.
  std::string flush();
  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace tern
