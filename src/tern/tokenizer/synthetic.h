#pragma once
// A small, deterministic tokenizer for random-weight test models (Tern's
// tests run offline, so their models cannot download a real one). Same
// structure as the real family's tokenizer.json (see SyntheticSpecials):
// Qwen3 and gpt-oss — pre-tokenizer split regex, ByteLevel, BPE, the
// family's added tokens appended after the vocabulary; Mistral — the legacy
// SentencePiece-style BPE with byte fallback of Mistral-7B/Mixtral-8x7B;
// DeepSeek-V3 — a Sequence of Split pre-tokenizers before ByteLevel, its
// sentence tokens at ids 0..2; GLM-4.5 — GLM-4's Split and ByteLevel, its
// 36 added tokens after the vocabulary. Merges are learned from an embedded corpus.
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
  // Mistral/Mixtral (legacy Llama-2-style file): normalizer Prepend "▁" +
  // Replace " " -> "▁", no pre-tokenizer, BPE with byte_fallback, fuse_unk
  // and unk_token <unk>, TemplateProcessing adding <s>, decoder Replace "▁"
  // -> " ", ByteFallback, Fuse, Strip one leading space. Ids: <unk>=0, <s>=1,
  // </s>=2 (the added tokens, all special), <0x00>..<0xFF> = 3..258, then
  // the single characters and merged pieces learned from the corpus in the
  // "▁" alphabet. tokenizer_config.json as Mixtral-8x7B-Instruct-v0.1's
  // (LlamaTokenizer, legacy, add_bos_token, its [INST] chat template).
  Mistral,
  // Qwen1.5/Qwen2 (Qwen1.5-MoE-A2.7B-Chat, Qwen2-57B-A14B-Instruct): as
  // Qwen3's file but only <|endoftext|> <|im_start|> <|im_end|> added (all
  // special), and their ChatML template with the default system prompt.
  Qwen2,
  // OLMoE (GPT-NeoX-20B style, OLMoE-1B-7B-0924-Instruct): NFC, ByteLevel
  // with GPT-2's regex, added <|endoftext|> (bos, eos), <|padding|> (pad) and
  // runs of 24 down to 2 spaces (non-special, normalized, as OLMoE's file
  // adds them), the Tulu chat template as its model card renders it.
  Olmoe,
  // DeepSeek-V3: normalizer an empty Sequence; pre-tokenizer a Sequence of
  // three Splits (digit runs of 1-3, runs of CJK ideographs and kana, its word
  // regex; all Isolated) then ByteLevel without regex; ByteLevel
  // post-processor and decoder (add_prefix_space true, as its file has them);
  // merges as "a b" strings. <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>
  // and <｜▁pad▁｜> are ids 0, 1, 2, in the vocabulary and added (special,
  // not normalized); the learned vocabulary follows from id 3; after it the
  // 15 tokens of its ids 128800..128814 in the same order: <｜fim▁hole｜>
  // <｜fim▁begin｜> <｜fim▁end｜> <｜User｜> <｜Assistant｜> <|EOT|>
  // <｜tool▁calls▁begin｜> ... <｜tool▁sep｜> (normalized, not special except
  // <|EOT|>). The real file's 800 <｜place▁holder▁no▁N｜> tokens (special,
  // ids 128000..128799, unused) are left out. No <think>: V3 has none.
  // tokenizer_config.json as DeepSeek-V3's: LlamaTokenizerFast, legacy,
  // add_bos_token, bos/eos/pad as {"__type": "AddedToken", ...} objects with
  // pad = eos = <｜end▁of▁sentence｜>, its chat template.
  DeepseekV3,
  // GLM-4.5 (GLM-4.5, GLM-4.5-Air, GLM-4.6; the GLM-4 tokenizer): no
  // normalizer; pre-tokenizer a Sequence of one Split (GLM-4's regex, Qwen2's
  // with \p{N}{1,3}; Isolated) then ByteLevel (trim_offsets, no regex);
  // ByteLevel post-processor and decoder with add_prefix_space true; BPE
  // with ignore_merges true, merges as ["a", "b"] pairs. After the learned
  // vocabulary, its 36 added tokens (real ids 151329..151364) in the same
  // order: <|endoftext|> [MASK] [gMASK] [sMASK] <sop> <eop> <|system|>
  // <|user|> <|assistant|> <|observation|> <|begin_of_image|> ...
  // <|end_of_transcription|> (these 18 special), then <|code_prefix|>
  // <|code_middle|> <|code_suffix|> <think> </think> <tool_call> </tool_call>
  // <tool_response> </tool_response> <arg_key> </arg_key> <arg_value>
  // </arg_value> /nothink <|begin_of_box|> <|end_of_box|> <|image|> <|video|>
  // (not special); none normalized. tokenizer_config.json as GLM-4.5's:
  // PreTrainedTokenizer, eos = pad = <|endoftext|>, no bos (the chat
  // template writes [gMASK]<sop> itself), padding_side left, its chat
  // template (glm45_chat_template.h). Sources: synthetic.cpp.
  Glm45,
  // Gemma 4 (gemma-4-26B-A4B): Gemma's SentencePiece-style layout (Gemma 3's
  // file: Replace " " -> "▁" without a prefix, Split on " ", BPE with byte
  // fallback, merges as pairs, decoder without Strip); the release's control
  // tokens at their ids (<pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, the
  // tool tokens 46-52, <|think|> 98, <|channel>/<channel|> 100/101,
  // <|turn>/<turn|> 105/106, "\n" 107, "\n\n" 108; <unusedN> between), then
  // <0x00>..<0xFF> and the learned tokens. tokenizer_config.json:
  // add_bos_token false, bos <bos>, eos <eos>, pad <pad>, a chat template with
  // the release's turn structure. Sources: synthetic.cpp.
  Gemma4,
};

struct SyntheticTokenizerOptions {
  SyntheticSpecials specials = SyntheticSpecials::Qwen3;
  // Merges to learn; fewer if the corpus runs out of pairs seen twice.
  // The embedded corpus yields ~820 merges seen twice, so the default gives
  // ~1100 tokens (256 bytes + merges + 26 added tokens; Mistral: 259 + the
  // corpus's characters + merges).
  size_t merges = 1024;
  int64_t model_max_length = 131072;
};

struct SyntheticTokenizer {
  std::string tokenizer_json;         // Hugging Face tokenizer.json text
  std::string tokenizer_config_json;  // tokenizer_config.json text (chat template, eos/pad)
  int32_t vocab_size = 0;             // max id + 1, including added tokens
  // <|im_end|> (Harmony: <|return|>, Mistral: </s>, Olmoe: <|endoftext|>, DeepseekV3: <｜end▁of▁sentence｜> = 1,
  // Glm45: <|endoftext|>, Gemma4: <eos> = 1)
  int32_t eos_id = -1;
  // <|endoftext|> (Mistral: -1, it has no pad token; Olmoe: <|padding|>; DeepseekV3: its pad_token, the eos, 1;
  // Glm45: <|endoftext|>, its eos; Gemma4: <pad> = 0)
  int32_t pad_id = -1;
};

// Same options -> byte-identical output.
SyntheticTokenizer build_synthetic_tokenizer(const SyntheticTokenizerOptions& options = {});

}  // namespace tern
