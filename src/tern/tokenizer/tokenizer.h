#pragma once
// Tokenizer — a Hugging Face tokenizer.json BPE tokenizer of either kind the
// open MoE families ship: byte-level BPE (Qwen2/Qwen3, Llama 3, GPT-OSS,
// DeepSeek-V3: a ByteLevel pre-tokenizer, ids of raw bytes) or
// SentencePiece-style BPE with byte fallback (Mistral, Mixtral, Llama 2:
// "▁" for spaces, from a Prepend/Replace normalizer (legacy files) or a
// Metaspace pre-tokenizer, <0xXX> tokens for characters outside the
// vocabulary, a Replace/ByteFallback/Fuse/Strip or Metaspace decoder).
// Encoding runs the same stages as the Rust `tokenizers` crate: added tokens
// are cut out of the raw text, each piece between them is normalized,
// pre-tokenized and merged by BPE. Immutable after loading; encode/decode
// are safe to call from several threads.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tern/tokenizer/added_tokens.h"
#include "tern/tokenizer/bpe.h"
#include "tern/tokenizer/normalizer.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/token_decoder.h"

namespace tern {

struct EncodeOptions {
  // Match special added tokens (<|im_start|>, ...) in the text. When false
  // they are tokenized as plain text, so user input cannot forge them.
  // Non-special added tokens (<think>) always match, as in tokenizers.
  bool allow_special = true;
  // Prepend bos_id() when the tokenizer has one (see post_processor_adds_bos).
  bool add_bos = false;
};

class Tokenizer {
 public:
  // Loads a tokenizer.json; any unsupported component throws tern::Error
  // naming the file and the component type.
  static Tokenizer load(const std::filesystem::path& tokenizer_json);
  // Parses tokenizer.json text; `origin` names it in error messages.
  static Tokenizer from_json_text(std::string_view json_text,
                                  std::string_view origin = "tokenizer.json");

  // Text (must be valid UTF-8, else tern::Error naming the byte) -> ids.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Ids -> text, special tokens included. Byte-level: the raw bytes the ids
  // stand for (may be invalid UTF-8 if the ids split a character; see
  // StreamDecoder). Otherwise the decoder chain's text, always UTF-8 (e.g.
  // the legacy Mistral chain drops one leading space). Unknown ids throw
  // tern::Error.
  std::string decode(std::span<const int32_t> ids) const;

  // The raw bytes of one token (an added token's content for added tokens);
  // SentencePiece-style: "▁" as a space, a <0xXX> token as its byte.
  const std::string& token_piece(int32_t id) const;
  // The token as spelled in the vocabulary, e.g. "Ġhello" (always UTF-8).
  const std::string& token_string(int32_t id) const;
  // Id of a vocabulary string ("Ġhello", "▁hello"), an added token
  // ("<|im_end|>") or the raw bytes of a token (" hello"); -1 if there is none.
  int32_t token_id(std::string_view piece_or_special) const;
  bool has_token(int32_t id) const;
  bool is_added(int32_t id) const;
  bool is_special(int32_t id) const;

  // Max id + 1 over the vocabulary and the added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }

  // The token the post_processor puts first (Llama 3's <|begin_of_text|>), -1 if none.
  int32_t bos_id() const { return bos_id_; }
  // Whether the tokenizer's post_processor would add bos_id() by default.
  bool post_processor_adds_bos() const { return bos_id_ >= 0; }

  // Byte-level: decode() is the tokens' raw bytes. Otherwise decoding runs
  // token_decoder() over decoder_token(id) (for StreamDecoder).
  bool is_byte_level() const { return model_.input() == BpeModel::Input::Bytes; }
  const TokenDecoder& token_decoder() const { return decoder_; }
  // What the decoder chain is given for `id`: an added token's content, else
  // its vocabulary string. Unknown ids throw tern::Error.
  const std::string& decoder_token(int32_t id) const;

 private:
  struct TokenInfo {
    std::string vocab_string;  // empty when the id is unused
    std::string bytes;         // what decode emits
    bool present = false;
    bool added = false;
    bool special = false;
  };
  const TokenInfo& info(int32_t id) const;
  void encode_plain(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  TokenDecoder decoder_;  // not byte-level only
  std::vector<AddedToken> added_tokens_;
  AddedTokenMatcher added_matcher_;
  TokenMap added_by_content_;
  std::vector<TokenInfo> tokens_;  // indexed by id
  int32_t bos_id_ = -1;
};

}  // namespace tern
