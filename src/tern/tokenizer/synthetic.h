#pragma once
// A small, deterministic tokenizer for random-weight test models (Tern's
// tests run offline, so their models cannot download a real one). Same
// structure as the real family's tokenizer.json (Qwen3 or gpt-oss, see
// SyntheticSpecials) — pre-tokenizer split regex, ByteLevel, BPE — with
// merges learned from an embedded corpus and the family's added tokens
// appended after the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tern {

// Which family's added tokens, pre-tokenizer and tokenizer_config.json the
// synthetic tokenizer copies.
enum class SyntheticSpecials {
  // Qwen3: NFC, Qwen2's split regex, <|endoftext|> <|im_start|> <|im_end|>
  // <think> ... (26 added tokens), ChatML chat template.
  Qwen3,
  // gpt-oss (o200k_harmony): no normalizer, the o200k split regex, and the
  // 21 added tokens of ids 199998..200018 in the same order (<|startoftext|>,
  // <|endoftext|>, <|reserved_200000|>, <|reserved_200001|>, <|return|>,
  // <|constrain|>, <|reserved_200004|>, <|channel|>, <|start|>, <|end|>,
  // <|message|>, ..., <|call|>, ..., <|endofprompt|>), all special;
  // bos <|startoftext|>, eos <|return|>, pad <|endoftext|>, no chat template
  // (the engine renders harmony itself).
  Harmony,
};

struct SyntheticTokenizerOptions {
  SyntheticSpecials specials = SyntheticSpecials::Qwen3;
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
  int32_t eos_id = -1;                // <|im_end|> (Harmony: <|return|>)
  int32_t pad_id = -1;                // <|endoftext|>
};

// Same options -> byte-identical output.
SyntheticTokenizer build_synthetic_tokenizer(const SyntheticTokenizerOptions& options = {});

}  // namespace tern
