#pragma once
// TokenDecoder — the tokenizer.json "decoder" stage of tokenizers that are
// not byte-level (SentencePiece-style BPE: Mistral, Mixtral, Llama 2): the
// chain that turns token strings ("▁Hello", "<0xE2>") back into text.
// Supports Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence of
// these with the Rust `tokenizers` crate's semantics, e.g. the legacy chain
// Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0): runs of <0xXX>
// tokens become their bytes (every byte of a run that is not valid UTF-8
// becomes U+FFFD), and one leading space of the whole text is dropped.
// No decoder at all joins the tokens with spaces, as tokenizers does.
//
// Decoding is incremental — push() one token, flush() at the end — and
// decode() is exactly those calls, so text streamed token by token is the
// text of the whole sequence. Immutable after parsing; the per-stream state
// lives in State.
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/regex.h"

namespace tern {

class TokenDecoder {
 public:
  // Parses the "decoder" value; unsupported types (ByteLevel, WordPiece,
  // CTC, BPEDecoder, ...) throw tern::Error naming the type.
  static TokenDecoder from_json(const nlohmann::json& config);

  // What one stream has seen so far (make one with start()).
  struct State {
    struct StepState {
      size_t tokens = 0;      // Metaspace: tokens seen (the first is special)
      std::string bytes;      // ByteFallback: the run of <0xXX> bytes not yet decoded
      size_t strip_left = 0;  // Strip after Fuse: leading characters still to drop
      std::string held;       // Strip after Fuse: trailing characters held back
    };
    std::vector<StepState> steps;
    size_t tokens_out = 0;  // no decoder: tokens written (joined with spaces)
  };
  // continuation: the stream continues text decoded elsewhere (a prompt), so
  // what only the text's start gets (the legacy chain's leading-space strip,
  // Metaspace's first-token rule) does not apply.
  State start(bool continuation = false) const;

  // Decodes one token string (a vocabulary string or an added token's
  // content), appending the text now certain to `out`.
  void push(State& state, std::string_view token, std::string& out) const;
  // Ends the stream: appends what was held back (a pending byte run).
  void flush(State& state, std::string& out) const;
  // Bytes held back in `state` (a byte run, stripped-candidate characters).
  size_t pending_bytes(const State& state) const;

  // The text of one token in the middle of a sequence, with a <0xXX> token
  // as its raw byte (ByteFallback) and leading/trailing Strip not applied.
  std::string piece(std::string_view token) const;

 private:
  struct Step {
    enum class Kind { Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
    bool after_fuse = false;       // sees all later tokens as one text
    std::string pattern{};         // Replace {"String"}; Strip/Metaspace: the character
    const Regex* regex = nullptr;  // Replace {"Regex"} (points into regexes_)
    std::string content{};         // Replace: the replacement
    size_t start = 0, stop = 0;    // Strip: characters to drop at each end
    bool first_drops = true;       // Metaspace: the first token drops the character (not "never")
  };
  void add_steps(const nlohmann::json& config);
  static std::string replaced(const Step& step, std::string_view text);
  void feed(State& state, size_t step, std::string token, std::string& out) const;
  void release_run(State& state, size_t step, std::string& out) const;
  void emit(State& state, std::string_view text, std::string& out) const;

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;  // no decoder
  bool fused_ = false;             // a Fuse was parsed
  std::vector<std::shared_ptr<const Regex>> regexes_;
};

}  // namespace tern
