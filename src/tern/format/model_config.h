#pragma once
// ModelConfig — the hyperparameters of a Hugging Face config.json that change
// the math, parsed and validated per architecture (see architectures.h).
// One struct for every architecture: fields a given architecture does not
// use keep their defaults. The raw JSON is kept for provenance.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tern {

// rope_scaling from config.json ("type" or "rope_type": linear, dynamic,
// yarn, llama3, ...). Fields not used by a type keep their defaults.
struct RopeScalingConfig {
  std::string type;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0, beta_slow = 1.0;                // yarn
  double mscale = 1.0, mscale_all_dim = 0.0;               // yarn (deepseek)
  double low_freq_factor = 1.0, high_freq_factor = 4.0;    // llama3
};

struct ModelConfig {
  std::string architecture;  // Hugging Face model_type, e.g. "qwen3_moe"

  // Trunk shapes.
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // may differ from hidden_size / num_heads
  bool attention_bias = false;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScalingConfig> rope_scaling;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;

  // Dense MLP (layers that are not MoE).
  int64_t intermediate_size = 0;

  // Mixture of experts.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  nlohmann::json raw;  // the config.json as read

  // Whether layer `layer` routes to experts (else it has a dense MLP).
  bool layer_is_moe(int64_t layer) const;
  int64_t num_moe_layers() const;
};

// Reads and validates config.json (a file, or a directory containing one).
// Unknown model_type -> "unsupported architecture X; supported: ...".
ModelConfig load_model_config(const std::filesystem::path& path);
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

}  // namespace tern
