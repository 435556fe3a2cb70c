#include "tern/synth/presets.h"

#include "tern/core/error.h"

namespace tern {

using nlohmann::json;

namespace {

json qwen3_moe_base() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}},
          {"model_type", "qwen3_moe"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"hidden_act", "silu"},
          {"initializer_range", 0.02},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"rope_scaling", nullptr},
          {"norm_topk_prob", true},
          {"decoder_sparse_step", 1},
          {"mlp_only_layers", json::array()},
          {"output_router_logits", false},
          {"router_aux_loss_coef", 0.001},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"sliding_window", nullptr},
          {"max_window_layers", 48},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.51.0"}};
}

json with(json base, const json& fields) {
  for (auto it = fields.begin(); it != fields.end(); ++it) base[it.key()] = it.value();
  return base;
}

}  // namespace

const std::vector<SynthPreset>& all_synth_presets() {
  static const std::vector<SynthPreset> presets = {
      {"qwen3_moe", "tiny", "2 layers, 8 experts, hidden 64, head_dim 32 != hidden/heads (unit tests)",
       with(qwen3_moe_base(), {{"hidden_size", 64},
                               {"num_hidden_layers", 2},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"head_dim", 32},
                               {"intermediate_size", 128},
                               {"moe_intermediate_size", 32},
                               {"num_experts", 8},
                               {"num_experts_per_tok", 2},
                               {"max_position_embeddings", 4096}})},
      {"qwen3_moe", "small", "4 layers, 32 experts, hidden 256 (~30 MiB in BF16)",
       with(qwen3_moe_base(), {{"hidden_size", 256},
                               {"num_hidden_layers", 4},
                               {"num_attention_heads", 8},
                               {"num_key_value_heads", 2},
                               {"head_dim", 64},
                               {"intermediate_size", 512},
                               {"moe_intermediate_size", 128},
                               {"num_experts", 32},
                               {"num_experts_per_tok", 4},
                               {"max_position_embeddings", 8192}})},
      {"qwen3_moe", "demo", "16 layers, 64 experts, hidden 1024 (~3.3 GiB in BF16)",
       with(qwen3_moe_base(), {{"hidden_size", 1024},
                               {"num_hidden_layers", 16},
                               {"num_attention_heads", 16},
                               {"num_key_value_heads", 4},
                               {"head_dim", 64},
                               {"intermediate_size", 2816},
                               {"moe_intermediate_size", 512},
                               {"num_experts", 64},
                               {"num_experts_per_tok", 4},
                               {"max_position_embeddings", 8192}})},
      {"qwen3_moe", "qwen3-30b-a3b", "the real Qwen3-30B-A3B shapes (~57 GiB in BF16)",
       with(qwen3_moe_base(), {{"hidden_size", 2048},
                               {"num_hidden_layers", 48},
                               {"num_attention_heads", 32},
                               {"num_key_value_heads", 4},
                               {"head_dim", 128},
                               {"intermediate_size", 6144},
                               {"moe_intermediate_size", 768},
                               {"num_experts", 128},
                               {"num_experts_per_tok", 8},
                               {"max_position_embeddings", 40960},
                               {"vocab_size", 151936}})},
  };
  return presets;
}

const SynthPreset& find_synth_preset(const std::string& architecture, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : all_synth_presets()) {
    if (p.architecture != architecture) continue;
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  if (names.empty()) fail("tern synth has no presets for architecture '{}'", architecture);
  fail("unknown preset '{}' for {}; presets: {}", name, architecture, fmt::join(names, ", "));
}

}  // namespace tern
