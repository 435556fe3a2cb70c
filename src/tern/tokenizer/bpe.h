#pragma once
// BpeModel — the tokenizer.json "model" of type BPE: vocabulary, ranked
// merges, and the merge loop that turns one pre-token into token ids. Two
// inputs: raw bytes looked up in the byte-level alphabet (GPT-2 style, for
// tokenizers with a ByteLevel pre-tokenizer), or UTF-8 characters looked up
// as they are (SentencePiece style, "▁hello"), where a character missing from
// the vocabulary becomes its <0xXX> byte tokens (byte_fallback) or unk_token
// (fused into one with fuse_unk), as in the Rust `tokenizers` crate.
// Thread-safe: encode_word may be called concurrently (the word cache is
// guarded by a mutex).
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tern {

// Token ids a tokenizer.json may use: [0, kMaxTokenId). Far above any
// released vocabulary (Gemma 3: 262,144), so a corrupt id is refused rather
// than sizing the id table from it.
inline constexpr int32_t kMaxTokenId = 1 << 22;

// Hashes std::string and std::string_view alike, so lookups by view do not
// build a temporary string (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // What encode_word is given.
  enum class Input {
    Bytes,  // raw bytes, each looked up as its byte-level character
    Chars,  // UTF-8 text, each character looked up as it is
  };

  // Parses a {"type": "BPE", ...} model. Merges may be "a b" strings or
  // ["a", "b"] pairs. Unsupported options (dropout, subword prefixes/suffixes,
  // byte_fallback with Input::Bytes, an unk_token missing from the vocab)
  // throw tern::Error.
  // `vocab` entries (token, id as parsed) count as part of model["vocab"]:
  // Tokenizer::from_json_text takes them out while parsing, which spares
  // building a JSON object of ~150k keys (see there); pass {} for none.
  using VocabEntries = std::vector<std::pair<std::string, nlohmann::json>>;
  static BpeModel from_json(const nlohmann::json& model, Input input, const VocabEntries& vocab);

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-token (raw bytes or UTF-8 text, see Input).
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;

  // Vocabulary as spelled in tokenizer.json ("Ġhello" or "▁hello" -> id).
  const TokenMap& vocab() const { return vocab_; }
  size_t merge_count() const { return merges_.size(); }
  Input input() const { return input_; }
  bool byte_fallback() const { return byte_fallback_; }
  // Id of the <0xXX> token of `byte` when byte_fallback is on, else -1.
  int32_t byte_fallback_id(uint8_t byte) const { return byte_fallback_ ? fallback_ids_[byte] : -1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const;
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  // Input::Chars: the first symbols of `word`, one per character, with byte
  // fallback and unk as tokenizers' BPE::merge_word.
  void initial_char_symbols(std::string_view word, std::vector<int32_t>& symbols) const;

  Input input_ = Input::Bytes;
  TokenMap vocab_;
  // ignore_merges: a whole pre-token found here (keyed by raw bytes) is emitted as is.
  TokenMap whole_words_;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // Bytes: id of each single-byte token; Chars: of each ASCII char; -1 if absent
  std::array<int32_t, 256> fallback_ids_{};  // id of <0xXX> for each byte, -1 if absent
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;  // -1: no unk_token, unknown characters are dropped
  std::unordered_map<uint64_t, Merge> merges_;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace tern
