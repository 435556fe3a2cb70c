#include "tern/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/tokenizer/byte_level.h"
#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
// Words longer than this are rarely repeated; caching them only costs memory.
constexpr size_t kMaxCachedWordBytes = 64;
// Bound on cached words; the cache is dropped and refilled when it is full.
constexpr size_t kMaxCachedWords = 1 << 16;

// A candidate merge of the symbol at `pos` with its right neighbour.
// Popped lowest rank first, then leftmost — the order tokenizers uses, which
// decides the result when the same pair occurs several times in a word.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// Per-thread working memory for merge_word, reused across words.
struct MergeScratch {
  std::vector<int32_t> id, prev, next;
  std::vector<Candidate> heap;
};
}  // namespace

struct BpeModel::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) {}
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

BpeModel BpeModel::from_json(const nlohmann::json& model, Input input, const VocabEntries& vocab_entries) {
  if (!model.is_object()) fail("tokenizer model must be an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") fail("unsupported tokenizer model type \"{}\" (supported: BPE)", printable(type));
  auto non_empty_string = [&](const char* key) {
    return model.contains(key) && model[key].is_string() &&
           !model[key].get_ref<const std::string&>().empty();
  };
  if (non_empty_string("continuing_subword_prefix") || non_empty_string("end_of_word_suffix"))
    fail(
        "unsupported BPE option: continuing_subword_prefix/end_of_word_suffix (only byte-level BPE "
        "is supported)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0)
    fail("unsupported BPE option: dropout");
  const auto& fallback = model.contains("byte_fallback") ? model["byte_fallback"] : nlohmann::json();
  if (!fallback.is_null() && !fallback.is_boolean())
    fail("BPE byte_fallback must be true or false, got {}", json_excerpt(fallback));
  const bool byte_fallback = fallback.is_boolean() && fallback.get<bool>();
  if (byte_fallback && input == Input::Bytes)
    fail("unsupported BPE option: byte_fallback with a ByteLevel pre_tokenizer");

  BpeModel bpe;
  bpe.input_ = input;
  bpe.byte_fallback_ = byte_fallback;
  const auto& vocab = model.at("vocab");
  if (!vocab.is_object()) fail("tokenizer model vocab must be an object");
  bpe.vocab_.reserve(vocab.size() + vocab_entries.size());
  auto add = [&](const std::string& token, const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokenId)
      fail("tokenizer vocab entry {} has an invalid id {} (ids must be integers in [0, {}))", json_excerpt(token),
           json_excerpt(id), kMaxTokenId);
    bpe.vocab_.insert_or_assign(token, id.get<int32_t>());  // a repeated key: the last wins, as in a JSON object
  };
  for (const auto& [token, id] : vocab.items()) add(token, id);
  for (const auto& [token, id] : vocab_entries) add(token, id);
  bpe.byte_ids_.fill(-1);
  bpe.fallback_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string key = input == Input::Bytes ? bytes_to_byte_level(std::string(1, static_cast<char>(b)))
                                            : std::string(b < 0x80 ? 1 : 0, static_cast<char>(b));
    if (auto it = bpe.vocab_.find(key); !key.empty() && it != bpe.vocab_.end()) bpe.byte_ids_[b] = it->second;
    // tokenizers spells a fallback byte format!("<{:#04X}>"): <0x0A>.
    if (auto it = bpe.vocab_.find(fmt::format("<0x{:02X}>", b)); it != bpe.vocab_.end())
      bpe.fallback_ids_[b] = it->second;
  }
  const auto& unk = model.contains("unk_token") ? model["unk_token"] : nlohmann::json();
  if (unk.is_string()) {
    auto it = bpe.vocab_.find(unk.get_ref<const std::string&>());
    if (it == bpe.vocab_.end())
      fail("BPE unk_token \"{}\" is not in the vocab", printable(unk.get_ref<const std::string&>()));
    bpe.unk_id_ = it->second;
  } else if (!unk.is_null()) {
    fail("BPE unk_token must be a string or null, got {}", json_excerpt(unk));
  }
  bpe.fuse_unk_ = model.value("fuse_unk", false);
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  if (bpe.ignore_merges_ && input == Input::Bytes) {
    bpe.whole_words_.reserve(bpe.vocab_.size());
    for (const auto& [token, id] : bpe.vocab_)
      if (auto raw = byte_level_to_bytes(token)) bpe.whole_words_.emplace(std::move(*raw), id);
  }

  const auto& merges = model.at("merges");
  bpe.merges_.reserve(merges.size());
  auto lookup = [&](std::string_view token, size_t rank) {
    auto it = bpe.vocab_.find(token);
    if (it == bpe.vocab_.end())
      fail("tokenizer merge {} uses \"{}\", which is not in the vocab", rank, printable(token));
    return it->second;
  };
  int32_t rank = 0;
  std::string merged;  // reused across merges
  for (const auto& m : merges) {
    std::string_view left, right;
    if (m.is_string()) {
      const auto& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail("tokenizer merge {} \"{}\" is not two tokens separated by one space", rank, printable(s));
      left = std::string_view(s).substr(0, space);
      right = std::string_view(s).substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get_ref<const std::string&>();
      right = m[1].get_ref<const std::string&>();
    } else {
      fail("tokenizer merge {} must be \"a b\" or [\"a\", \"b\"], got {}", rank, json_excerpt(m));
    }
    int32_t a = lookup(left, rank), b = lookup(right, rank);
    merged.assign(left).append(right);
    auto it = bpe.vocab_.find(merged);
    if (it == bpe.vocab_.end())
      fail("tokenizer merge {} produces \"{}\", which is not in the vocab", rank, printable(merged));
    // A repeated pair takes its last rank, as tokenizers' HashMap collect does.
    bpe.merges_.insert_or_assign(pair_key(a, b), Merge{rank, it->second});
    ++rank;
  }
  return bpe;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& ids) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1 && (input_ == Input::Bytes || byte_ids_[static_cast<uint8_t>(bytes[0])] >= 0)) {
    int32_t id = byte_ids_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) ids.push_back(id);
    return;
  }
  if (ignore_merges_) {
    const TokenMap& whole = input_ == Input::Bytes ? whole_words_ : vocab_;
    if (auto it = whole.find(bytes); it != whole.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (auto it = cache_->words.find(bytes); it != cache_->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = ids.size();
  merge_word(bytes, ids);
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->words.size() >= kMaxCachedWords) cache_->words.clear();
    cache_->words.emplace(
        std::string(bytes),
        std::vector<int32_t>(ids.begin() + static_cast<ptrdiff_t>(first), ids.end()));
  }
}

// Linked-list BPE with a min-heap of candidate merges: O(n log n) per word,
// so a megabyte-long run of one character does not go quadratic.
void BpeModel::merge_word(std::string_view bytes, std::vector<int32_t>& ids) const {
  thread_local MergeScratch s;
  s.id.clear();
  if (input_ == Input::Chars) {
    initial_char_symbols(bytes, s.id);
  } else {
    for (char c : bytes) {
      // Bytes without a token are dropped, as tokenizers does without an unk_token.
      int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) s.id.push_back(id);
    }
  }
  const auto n = static_cast<int32_t>(s.id.size());
  s.prev.resize(n);
  s.next.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
  }
  // A min-heap on s.heap's storage, kept across words to avoid reallocating.
  auto& heap = s.heap;
  heap.clear();
  auto push = [&](int32_t pos) {
    int32_t right = s.next[pos];
    if (right < 0) return;
    if (const Merge* m = find_merge(s.id[pos], s.id[right])) {
      heap.push_back({m->rank, pos, m->new_id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);

  constexpr int32_t kRemoved = -2;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    Candidate top = heap.back();
    heap.pop_back();
    int32_t pos = top.pos;
    if (s.prev[pos] == kRemoved) continue;
    int32_t right = s.next[pos];
    if (right < 0) continue;
    // Skip stale candidates: a neighbour changed since this one was queued.
    const Merge* m = find_merge(s.id[pos], s.id[right]);
    if (!m || m->new_id != top.new_id) continue;
    s.id[pos] = top.new_id;
    s.next[pos] = s.next[right];
    if (s.next[right] >= 0) s.prev[s.next[right]] = pos;
    s.prev[right] = kRemoved;
    if (s.prev[pos] >= 0) push(s.prev[pos]);
    push(pos);
  }
  for (int32_t i = 0; i >= 0 && n > 0; i = s.next[i]) ids.push_back(s.id[i]);
}

void BpeModel::initial_char_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  // A pending unk is emitted before the next character found in the vocab;
  // fuse_unk grows it instead of starting another. As in tokenizers, byte
  // fallback tokens do not emit a pending unk first (it follows them).
  bool unk_pending = false;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    auto lead = static_cast<uint8_t>(word[pos]);
    int32_t id = -1;
    if (lead < 0x80) {
      id = byte_ids_[lead];
      ++pos;
    } else {
      utf8_decode(word, pos);
      if (auto it = vocab_.find(word.substr(begin, pos - begin)); it != vocab_.end()) id = it->second;
    }
    if (id >= 0) {
      if (unk_pending) symbols.push_back(unk_id_);
      unk_pending = false;
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t i = begin; i < pos; ++i) all = all && fallback_ids_[static_cast<uint8_t>(word[i])] >= 0;
      if (all) {
        for (size_t i = begin; i < pos; ++i) symbols.push_back(fallback_ids_[static_cast<uint8_t>(word[i])]);
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no unk_token: the character is dropped
    if (unk_pending && !fuse_unk_) symbols.push_back(unk_id_);
    unk_pending = true;
  }
  if (unk_pending) symbols.push_back(unk_id_);
}

}  // namespace tern
