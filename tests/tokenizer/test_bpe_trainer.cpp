// The BPE trainer (incremental pair counts) against the textbook algorithm
// written out here on token strings: recount every adjacent pair of every word,
// merge the most frequent one (ties: the smaller (left, right) strings), repeat.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tern/tokenizer/bpe_trainer.h"

namespace tern {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// Words as SentencePiece sees them: "▁" + each space-separated word.
Merges textbook_metaspace_merges(const std::string& corpus, size_t max_merges, int64_t min_pair_count) {
  std::map<std::vector<std::string>, int64_t> words;
  size_t begin = 0;
  while (begin <= corpus.size()) {
    size_t end = corpus.find(' ', begin);
    if (end == std::string::npos) end = corpus.size();
    std::vector<std::string> symbols = {"\u2581"};
    for (size_t i = begin; i < end; ++i) symbols.emplace_back(1, corpus[i]);
    ++words[symbols];
    begin = end + 1;
  }
  Merges merges;
  while (merges.size() < max_merges) {
    std::map<std::pair<std::string, std::string>, int64_t> counts;
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) counts[{symbols[i], symbols[i + 1]}] += count;
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts)  // in string order: the first maximum wins ties
      if (count > best_count) {
        best = &pair;
        best_count = count;
      }
    if (!best || best_count < min_pair_count) break;
    const auto chosen = *best;
    merges.push_back(chosen);
    std::map<std::vector<std::string>, int64_t> merged_words;
    for (const auto& [symbols, count] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == chosen.first && symbols[i + 1] == chosen.second) {
          out.push_back(chosen.first + chosen.second);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      merged_words[out] += count;
    }
    words = std::move(merged_words);
  }
  return merges;
}

TEST(BpeTrainer, MatchesTheTextbookAlgorithmOnRandomCorpora) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    // A small alphabet and repeated letters: many overlapping pairs ("aaa"),
    // ties, and merged strings reachable by two splits ("ab"+"c", "a"+"bc").
    const int letters = 2 + trial % 4;
    std::string corpus;
    const int n_words = 5 + static_cast<int>(rng() % 60);
    for (int w = 0; w < n_words; ++w) {
      if (w) corpus += ' ';
      const int len = 1 + static_cast<int>(rng() % 9);
      for (int i = 0; i < len; ++i) corpus += static_cast<char>('a' + rng() % letters);
    }
    const size_t max_merges = 1 + rng() % 80;
    const int64_t min_count = 1 + static_cast<int64_t>(trial % 3);
    const BpeVocabulary vocab = train_metaspace_bpe(corpus, max_merges, static_cast<size_t>(min_count));
    EXPECT_EQ(vocab.merges, textbook_metaspace_merges(corpus, max_merges, min_count))
        << "corpus '" << corpus << "', max_merges " << max_merges << ", min count " << min_count;
  }
}

TEST(BpeTrainer, MergesTheMostFrequentPairFirstAndStopsBelowTheMinimumCount) {
  // Words "▁aab" x3 and "▁ab" x2. (▁, a) and (a, b) both occur 5 times; strings
  // compare as bytes and "▁" is E2 96 81, so (a, b) wins. Then "▁ a ab" x3 and
  // "▁ ab" x2: (▁, a) and (a, ab) 3 each, (a, ab) wins; then (▁, aab) 3 and
  // (▁, ab) 2; with a minimum of 3 the last one is not learned.
  const Merges all = {{"a", "b"}, {"a", "ab"}, {"\u2581", "aab"}, {"\u2581", "ab"}};
  EXPECT_EQ(train_metaspace_bpe("aab aab aab ab ab", 10, 2).merges, all);
  EXPECT_EQ(train_metaspace_bpe("aab aab aab ab ab", 10, 3).merges, Merges(all.begin(), all.begin() + 3));
  EXPECT_EQ(train_metaspace_bpe("aab aab aab ab ab", 2, 2).merges, Merges(all.begin(), all.begin() + 2));
}

}  // namespace
}  // namespace tern
