#pragma once
// A small, deterministic Qwen3-style tokenizer for random-weight test models
// (Tern's tests run offline, so their models cannot download a real one).
// Same structure as Qwen3's tokenizer.json — NFC, Qwen2's split regex,
// ByteLevel, BPE — with merges learned from an embedded corpus and Qwen3's
// added tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <think>, ...)
// appended after the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tern {

struct SyntheticTokenizerOptions {
  // Merges to learn; fewer if the corpus runs out of pairs seen twice.
  // The embedded corpus yields ~820 merges seen twice, so the default gives
  // ~1100 tokens (256 bytes + merges + 26 added tokens).
  size_t merges = 1024;
  int64_t model_max_length = 131072;
};

struct SyntheticTokenizer {
  std::string tokenizer_json;         // Hugging Face tokenizer.json text
  std::string tokenizer_config_json;  // tokenizer_config.json text (chat template, eos/pad)
  int32_t vocab_size = 0;             // max id + 1, including added tokens
  int32_t eos_id = -1;                // <|im_end|>
  int32_t pad_id = -1;                // <|endoftext|>
};

// Same options -> byte-identical output.
SyntheticTokenizer build_synthetic_tokenizer(const SyntheticTokenizerOptions& options = {});

}  // namespace tern
