#pragma once
// ConfigReader — typed access to config.json fields with errors that name
// the file and field, and the readers of fields that many architectures share.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tern {

struct ModelConfig;

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string source, std::string architecture)
      : json_(json), source_(std::move(source)), arch_(std::move(architecture)) {}

  bool has(const std::string& key) const;  // present and not null
  int64_t get_int(const std::string& key) const;  // required
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<int64_t> get_int_list(const std::string& key) const;  // absent -> empty
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<std::string> get_string_list(const std::string& key) const;  // absent -> empty
  const nlohmann::json& raw() const { return json_; }
  const std::string& source() const { return source_; }

  // Throws "<source>: field 'key' <message>".
  [[noreturn]] void invalid(const std::string& key, const std::string& message) const;
  void require_positive(const std::string& key, int64_t value) const;
  // Throws unless lo <= value <= hi ("must be in [lo, hi], got value").
  void require_range(const std::string& key, int64_t value, int64_t lo, int64_t hi) const;
  // Throws unless value is finite and lo < value <= hi.
  void require_finite(const std::string& key, double value, double lo_exclusive, double hi) const;

 private:
  const nlohmann::json& json_;
  std::string source_;
  std::string arch_;
};

// Reads the fields of a Llama-style decoder (hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps,
// rope_theta, rope_scaling, max_position_embeddings, vocab_size,
// tie_word_embeddings, attention_bias) and validates them, and
// quantization_config (read_weight_quantization).
void read_decoder_fields(const ConfigReader& r, ModelConfig& cfg);
// quantization_config: "fp8" (fmt e4m3, weight_block_size [rows, cols]) fills
// cfg.fp8; "mxfp4" is left to the architecture (gpt_oss reads it); any other
// method is refused naming it.
void read_weight_quantization(const ConfigReader& r, ModelConfig& cfg);
// rms_norm_eps, rope_theta and max_position_embeddings with a family's own
// defaults (transformers' config class for it), validated.
void read_norm_rope_fields(const ConfigReader& r, ModelConfig& cfg, double rms_norm_eps, double rope_theta,
                           int64_t max_position_embeddings);
// cfg.sliding_layers from layer_types ("sliding_attention" |
// "full_attention", one per layer), or where a config has none from the
// family's rule: `default_sliding(layer)`.
void read_sliding_layer_types(const ConfigReader& r, ModelConfig& cfg, bool (*default_sliding)(int64_t layer));
// A family that runs plain RoPE and SwiGLU: a "default" rope_scaling is
// dropped, any other is refused, and hidden_act must be silu (errors name
// `family`).
void require_plain_rope_and_silu(const ConfigReader& r, ModelConfig& cfg, std::string_view family);
// The MoE fields Qwen's MoE families share (qwen3_moe, qwen2_moe):
// intermediate_size (dense layers), num_experts, num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers.
void read_qwen_moe_fields(const ConfigReader& r, ModelConfig& cfg);

// The MoE fields of DeepSeek-V3's family (deepseek_v3, glm4_moe):
// n_routed_experts, num_experts_per_tok, moe_intermediate_size,
// first_k_dense_replace (the dense layers, with intermediate_size),
// n_shared_experts (one ungated shared expert of their summed width) and the
// noaux_tc router (topk_method, scoring_func, n_group, topk_group,
// norm_topk_prob, routed_scaling_factor), with the family's transformers
// defaults for fields a config omits.
struct GroupedMoeDefaults {
  int64_t experts, top_k, first_dense, shared, n_group, topk_group;
  double routed_scaling;
};
void read_grouped_moe_fields(const ConfigReader& r, ModelConfig& cfg, const GroupedMoeDefaults& defaults);

// Checks the products of fields that size tensors and loops (attention
// width, MoE layers x experts) against config_limits, for every
// architecture; parse_model_config calls it after the architecture's parse.
void check_config_products(const ConfigReader& r, const ModelConfig& cfg);

}  // namespace tern
