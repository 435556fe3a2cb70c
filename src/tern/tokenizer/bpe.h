#pragma once
// BpeModel — the tokenizer.json "model" of type BPE over the byte-level
// alphabet: vocabulary, ranked merges, and the merge loop that turns one
// pre-token's bytes into token ids. Thread-safe: encode_word may be called
// concurrently (the word cache is guarded by a mutex).
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // Parses a {"type": "BPE", ...} model. Merges may be "a b" strings or
  // ["a", "b"] pairs. Options outside byte-level BPE (dropout, subword
  // prefixes/suffixes, byte_fallback) throw tern::Error.
  static BpeModel from_json(const nlohmann::json& model);

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-token given as raw bytes.
  void encode_word(std::string_view bytes, std::vector<int32_t>& ids) const;

  // Vocabulary in the byte-level alphabet ("Ġhello" -> id).
  const TokenMap& vocab() const { return vocab_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const;
  void merge_word(std::string_view bytes, std::vector<int32_t>& ids) const;

  TokenMap vocab_;
  // ignore_merges: a whole pre-token found here (keyed by raw bytes) is emitted as is.
  TokenMap whole_words_;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // id of each single-byte token, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace tern
