#include "tern/tokenizer/bpe_trainer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "tern/tokenizer/byte_level.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
// One distinct word of the corpus, as symbol ids, with its count.
struct TrainingWord {
  std::vector<int32_t> symbols;
  int64_t count;
};

// Appends merges (and merged tokens) to `vocab` until `max_merges` or no
// pair occurs `min_pair_count` times. `id_of` maps each token to its id.
// The pair counts are kept up to date across merges: only the words that hold
// the merged pair are recounted, so a merge costs a scan of the words plus the
// work on the words it changes, without rebuilding the table (a full recount per
// merge made `tern synth` allocation-bound, 12x slower under ASan). The counts,
// and so the merges chosen, are the ones a full recount gives.
void learn_merges(std::vector<TrainingWord>& words, BpeVocabulary& vocab,
                  std::unordered_map<std::string, int32_t>& id_of, size_t max_merges, size_t min_pair_count) {
  auto key = [](int32_t a, int32_t b) {
    return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
  };
  std::unordered_map<uint64_t, int64_t> pair_counts;
  auto count_pairs = [&](const TrainingWord& w, int64_t sign) {
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      auto it = pair_counts.try_emplace(key(w.symbols[i], w.symbols[i + 1]), 0).first;
      it->second += sign * w.count;
      if (it->second == 0) pair_counts.erase(it);
    }
  };
  for (const TrainingWord& w : words) count_pairs(w, +1);
  while (vocab.merges.size() < max_merges) {
    int64_t best_count = 0;
    int32_t best_a = -1, best_b = -1;
    for (const auto& [k, count] : pair_counts) {
      auto a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xFFFFFFFFu);
      bool better = count > best_count;
      if (count == best_count && best_a >= 0) {
        const auto& ta = vocab.tokens[a];
        const auto& tb = vocab.tokens[b];
        const auto& ba = vocab.tokens[best_a];
        const auto& bb = vocab.tokens[best_b];
        better = ta != ba ? ta < ba : tb < bb;
      }
      if (better) {
        best_count = count;
        best_a = a;
        best_b = b;
      }
    }
    if (best_a < 0 || best_count < static_cast<int64_t>(min_pair_count)) break;

    std::string merged = vocab.tokens[best_a] + vocab.tokens[best_b];
    int32_t merged_id;
    if (auto it = id_of.find(merged); it != id_of.end()) {
      merged_id = it->second;  // the same string was already built from another split
    } else {
      merged_id = static_cast<int32_t>(vocab.tokens.size());
      vocab.tokens.push_back(merged);
      id_of.emplace(merged, merged_id);
    }
    vocab.merges.emplace_back(vocab.tokens[best_a], vocab.tokens[best_b]);
    for (TrainingWord& w : words) {
      auto& s = w.symbols;
      bool holds = false;
      for (size_t i = 0; i + 1 < s.size() && !holds; ++i) holds = s[i] == best_a && s[i + 1] == best_b;
      if (!holds) continue;
      count_pairs(w, -1);
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == best_a && s[i + 1] == best_b) {
          s[out++] = merged_id;
          ++i;
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
      count_pairs(w, +1);
    }
  }
}
}  // namespace

BpeVocabulary train_byte_level_bpe(std::string_view corpus, const PreTokenizer& pre_tokenizer,
                                   size_t max_merges, size_t min_pair_count) {
  BpeVocabulary vocab;
  std::vector<std::pair<char32_t, int>> alphabet;
  for (int b = 0; b < 256; ++b) alphabet.push_back({byte_to_unicode(static_cast<uint8_t>(b)), b});
  std::sort(alphabet.begin(), alphabet.end());
  std::vector<int32_t> byte_id(256);
  std::unordered_map<std::string, int32_t> id_of;
  for (const auto& [cp, b] : alphabet) {
    byte_id[b] = static_cast<int32_t>(vocab.tokens.size());
    vocab.tokens.push_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    id_of.emplace(vocab.tokens.back(), byte_id[b]);
  }

  // Distinct words with their counts; std::map keeps the order independent of hashing.
  std::map<std::string, int64_t> word_counts;
  {
    std::string buffer(corpus);
    std::vector<ByteRange> pieces;
    pre_tokenizer.split(buffer, pieces);
    for (const ByteRange& p : pieces) ++word_counts[buffer.substr(p.begin, p.end - p.begin)];
  }
  std::vector<TrainingWord> words;
  for (const auto& [text, count] : word_counts) {
    TrainingWord w{{}, count};
    for (char c : text) w.symbols.push_back(byte_id[static_cast<uint8_t>(c)]);
    words.push_back(std::move(w));
  }
  learn_merges(words, vocab, id_of, max_merges, min_pair_count);
  return vocab;
}

BpeVocabulary train_metaspace_bpe(std::string_view corpus, size_t max_merges, size_t min_pair_count) {
  const std::string meta = "\u2581";
  // Words ("▁word", or a run of characters after a control character) with counts.
  std::map<std::string, int64_t> word_counts;
  std::set<char32_t> alphabet = {U'\u2581'};
  for (char32_t c = 0x21; c < 0x7F; ++c) alphabet.insert(c);
  std::string word;
  auto end_word = [&] {
    if (!word.empty()) ++word_counts[word];
    word.clear();
  };
  bool text_start = true;
  size_t pos = 0;
  while (pos < corpus.size()) {
    const size_t begin = pos;
    const char32_t cp = utf8_decode(corpus, pos);
    if (cp < 0x20 || cp == 0x7F) {
      end_word();
      text_start = false;
      continue;
    }
    if (text_start || cp == ' ') {
      end_word();
      word = meta;
      text_start = false;
      if (cp == ' ') continue;
    }
    word.append(corpus, begin, pos - begin);
    alphabet.insert(cp);
  }
  end_word();

  BpeVocabulary vocab;
  std::unordered_map<std::string, int32_t> id_of;
  for (char32_t cp : alphabet) {
    std::string s;
    utf8_append(s, cp);
    id_of.emplace(s, static_cast<int32_t>(vocab.tokens.size()));
    vocab.tokens.push_back(std::move(s));
  }
  std::vector<TrainingWord> words;
  for (const auto& [text, count] : word_counts) {
    TrainingWord w{{}, count};
    size_t at = 0;
    while (at < text.size()) {
      const size_t begin = at;
      utf8_decode(text, at);
      w.symbols.push_back(id_of.at(text.substr(begin, at - begin)));
    }
    words.push_back(std::move(w));
  }
  learn_merges(words, vocab, id_of, max_merges, min_pair_count);
  return vocab;
}

}  // namespace tern
