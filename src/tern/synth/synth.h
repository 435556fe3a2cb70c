#pragma once
// synthesize_model — writes a random-weight model in the real Hugging Face
// layout (config.json, sharded safetensors + index, tokenizer.json,
// tokenizer_config.json, generation_config.json). Tern's only source of
// models on machines without a model hub; every code path is tested on them.
//
// Deterministic: the same options and seed give the same bytes. Each
// tensor's values depend only on (seed, tensor name), not on sharding.
// Streams to disk, so a 57 GiB qwen3-30b-a3b preset needs little memory.
// For an architecture with MXFP4 and float layouts (gpt_oss), one seed gives
// the same weights in both: the float tensors hold exactly the dequantized
// MXFP4 values.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/core/dtype.h"

namespace tern {

struct SynthOptions {
  std::string architecture = "qwen3_moe";
  std::string preset = "tiny";
  std::filesystem::path output;
  uint64_t seed = 0;
  DType dtype = DType::BF16;  // of float tensors (MXFP4 blocks and scales are U8)
  // Checkpoint layout (ArchSpec::layouts); empty = the architecture's first,
  // the one its releases ship (gpt_oss: "mxfp4"; "float" is the dequantized one).
  std::string layout;
  // > 0: write the fine-grained FP8 layout DeepSeek-V3/R1, Kimi-K2 and
  // Qwen3's -FP8 releases ship: every projection in the decoder layers
  // (not embeddings, lm_head, norms, routers) as F8_E4M3 with an F32
  // "<name>_scale_inv" per fp8_block x fp8_block block (scale = the block's
  // max |value| / 448, values rounded to nearest), and the quantization_config
  // that says so. Other tensors keep `dtype`.
  int64_t fp8_block = 0;
  // config.json fields that replace the preset's (Hugging Face names).
  nlohmann::json overrides = nlohmann::json::object();
  // A real tokenizer.json to ship instead of the built-in small BPE.
  std::filesystem::path tokenizer;
  uint64_t shard_bytes = 4ull << 30;  // one model.safetensors if everything fits
  bool force = false;
  bool quiet = false;
};

struct SynthResult {
  nlohmann::json config;
  uint64_t total_bytes = 0;
  uint64_t num_tensors = 0;
  size_t num_shards = 0;
};

// Preset names for an architecture ("tiny", "small", ...).
std::vector<std::string> synth_presets(const std::string& architecture);
// The config.json the preset and overrides produce (validated), without writing.
nlohmann::json synth_config(const SynthOptions& options, int64_t tokenizer_vocab_size);
SynthResult synthesize_model(const SynthOptions& options);

}  // namespace tern
