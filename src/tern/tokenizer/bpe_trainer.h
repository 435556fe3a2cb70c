#pragma once
// BPE training: learns merges from a corpus the standard way (repeatedly
// merge the most frequent adjacent pair), over the byte-level alphabet
// (GPT-2 style) or over characters in SentencePiece's "▁" alphabet. Used to
// build the vocabulary of synthetic test models. Deterministic: ties are
// broken by the pair's strings, never by hash order.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern {

class PreTokenizer;

struct BpeVocabulary {
  // Tokens in id order, spelled in the byte-level alphabet: the 256 byte
  // tokens (ordered by their character, as GPT-2 does), then merged tokens.
  std::vector<std::string> tokens;
  // Merges in rank order, as (left, right) token strings.
  std::vector<std::pair<std::string, std::string>> merges;
};

// Learns up to `max_merges` merges from `corpus`, split into words by
// `pre_tokenizer`. Stops early when no pair occurs at least `min_pair_count` times.
BpeVocabulary train_byte_level_bpe(std::string_view corpus, const PreTokenizer& pre_tokenizer,
                                   size_t max_merges, size_t min_pair_count = 2);

// SentencePiece style: spaces become "▁" and the text gets a leading "▁"
// (as the legacy Llama normalizer does), words are cut before each "▁" and
// at control characters such as newlines (which are left to byte fallback,
// as in Llama's vocabulary). `tokens` are the single characters — printable ASCII, "▁"
// and every other character of the corpus, by code point — then the merged
// tokens; merges never cross a word boundary.
BpeVocabulary train_metaspace_bpe(std::string_view corpus, size_t max_merges, size_t min_pair_count = 2);

}  // namespace tern
