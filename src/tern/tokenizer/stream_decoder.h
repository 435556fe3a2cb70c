#pragma once
// StreamDecoder — turns token ids arriving one at a time into text that is
// always whole UTF-8. Byte-level tokenizers: bytes of a character split
// across tokens are held back until it completes, and bytes that can never
// form a character become U+FFFD as soon as that is certain (so output never
// stalls on garbage). Other tokenizers (SentencePiece-style) run their
// decoder chain incrementally: a stream fed a sequence from its start gives
// exactly Tokenizer::decode of the sequence — the legacy Mistral chain's
// leading space is dropped once, at the start of the stream, and a run of
// <0xXX> byte tokens is held until the next other token (or flush), since a
// run that is not valid UTF-8 becomes one U+FFFD per byte.
#include <cstdint>
#include <string>
#include <string_view>

#include "tern/tokenizer/token_decoder.h"

namespace tern {

class Tokenizer;

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder. The stream starts here: start a
  // new StreamDecoder for each reply. With `continuation` the tokens continue
  // a text decoded elsewhere (a completion after its prompt): "▁cat" after
  // "The" is " cat", as Hugging Face's decode of prompt + completion minus
  // the prompt gives, not the "cat" a reply alone decodes to.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool continuation = false);

  // Adds one token; returns the text that is now complete (maybe empty).
  std::string push(int32_t id);
  // Adds raw bytes (for callers that already hold token bytes, e.g. from
  // token_piece); they bypass a SentencePiece-style decoder chain, so do not
  // mix push and push_bytes on such a tokenizer.
  std::string push_bytes(std::string_view bytes);
  // Ends the stream: incomplete UTF-8 held back becomes U+FFFD; a held byte
  // run is decoded.
  std::string flush();
  // Bytes currently held back.
  size_t pending_bytes() const;

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
  TokenDecoder::State chain_;  // not byte-level only
};

}  // namespace tern
