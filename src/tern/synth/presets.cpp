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

// transformers' GptOssConfig as released (docs/gpt_oss_facts.md §1), at
// gpt-oss-20b's shapes; layer_types follows num_hidden_layers.
json gpt_oss_base() {
  return {{"architectures", {"GptOssForCausalLM"}},
          {"model_type", "gpt_oss"},
          {"attention_bias", true},
          {"attention_dropout", 0.0},
          {"experts_per_token", 4},
          {"num_experts_per_tok", 4},
          {"head_dim", 64},
          {"hidden_act", "silu"},
          {"hidden_size", 2880},
          {"initial_context_length", 4096},
          {"initializer_range", 0.02},
          {"intermediate_size", 2880},
          {"layer_types", {"sliding_attention", "full_attention"}},
          {"max_position_embeddings", 131072},
          {"num_attention_heads", 64},
          {"num_hidden_layers", 24},
          {"num_key_value_heads", 8},
          {"num_local_experts", 32},
          {"output_router_logits", false},
          {"quantization_config",
           {{"modules_to_not_convert",
             {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
            {"quant_method", "mxfp4"}}},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"factor", 32.0},
            {"original_max_position_embeddings", 4096},
            {"rope_type", "yarn"},
            {"truncate", false}}},
          {"rope_theta", 150000},
          {"router_aux_loss_coef", 0.9},
          {"sliding_window", 128},
          {"swiglu_limit", 7.0},
          {"tie_word_embeddings", false},
          {"transformers_version", "4.55.0.dev0"},
          {"use_cache", true},
          {"vocab_size", 201088}};
}

// Mixtral-8x7B-v0.1's config.json as released.
json mixtral_base() {
  return {{"architectures", {"MixtralForCausalLM"}},
          {"model_type", "mixtral"},
          {"attention_dropout", 0.0},
          {"hidden_act", "silu"},
          {"hidden_size", 4096},
          {"initializer_range", 0.02},
          {"intermediate_size", 14336},
          {"max_position_embeddings", 32768},
          {"num_attention_heads", 32},
          {"num_experts_per_tok", 2},
          {"num_hidden_layers", 32},
          {"num_key_value_heads", 8},
          {"num_local_experts", 8},
          {"output_router_logits", false},
          {"rms_norm_eps", 1e-05},
          {"rope_theta", 1000000.0},
          {"router_aux_loss_coef", 0.02},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.36.0.dev0"},
          {"use_cache", true},
          {"vocab_size", 32000}};
}

// OLMoE-1B-7B-0924's config.json as released (no rms_norm_eps: the default 1e-5).
json olmoe_base() {
  return {{"architectures", {"OlmoeForCausalLM"}},
          {"model_type", "olmoe"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"clip_qkv", nullptr},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"initializer_range", 0.02},
          {"intermediate_size", 1024},
          {"max_position_embeddings", 4096},
          {"norm_topk_prob", false},
          {"num_attention_heads", 16},
          {"num_experts", 64},
          {"num_experts_per_tok", 8},
          {"num_hidden_layers", 16},
          {"num_key_value_heads", 16},
          {"output_router_logits", false},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000.0},
          {"router_aux_loss_coef", 0.01},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.43.0.dev0"},
          {"use_cache", true},
          {"vocab_size", 50304}};
}

// DeepSeek-V3's config.json as released, less its quantization_config (the
// release is FP8, which Tern refuses: synth writes the BF16 conversion users
// run) and auto_map.
json deepseek_v3_base() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"aux_loss_alpha", 0.001},
          {"ep_size", 1},
          {"first_k_dense_replace", 3},
          {"hidden_act", "silu"},
          {"hidden_size", 7168},
          {"initializer_range", 0.02},
          {"intermediate_size", 18432},
          {"kv_lora_rank", 512},
          {"max_position_embeddings", 163840},
          {"model_type", "deepseek_v3"},
          {"moe_intermediate_size", 2048},
          {"moe_layer_freq", 1},
          {"n_group", 8},
          {"n_routed_experts", 256},
          {"n_shared_experts", 1},
          {"norm_topk_prob", true},
          {"num_attention_heads", 128},
          {"num_experts_per_tok", 8},
          {"num_hidden_layers", 61},
          {"num_key_value_heads", 128},
          {"num_nextn_predict_layers", 1},
          {"pretraining_tp", 1},
          {"q_lora_rank", 1536},
          {"qk_nope_head_dim", 128},
          {"qk_rope_head_dim", 64},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling",
           {{"beta_fast", 32},
            {"beta_slow", 1},
            {"factor", 40},
            {"mscale", 1.0},
            {"mscale_all_dim", 1.0},
            {"original_max_position_embeddings", 4096},
            {"type", "yarn"}}},
          {"rope_theta", 10000},
          {"routed_scaling_factor", 2.5},
          {"scoring_func", "sigmoid"},
          {"seq_aux", true},
          {"tie_word_embeddings", false},
          {"topk_group", 4},
          {"topk_method", "noaux_tc"},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.33.1"},
          {"use_cache", true},
          {"v_head_dim", 128},
          {"vocab_size", 129280}};
}

// GLM-4.5's config.json as released (its token ids come from the family).
json glm4_moe_base() {
  return {{"architectures", {"Glm4MoeForCausalLM"}},
          {"attention_bias", true},
          {"attention_dropout", 0.0},
          {"first_k_dense_replace", 3},
          {"head_dim", 128},
          {"hidden_act", "silu"},
          {"hidden_size", 5120},
          {"initializer_range", 0.02},
          {"intermediate_size", 12288},
          {"max_position_embeddings", 131072},
          {"model_type", "glm4_moe"},
          {"moe_intermediate_size", 1536},
          {"n_group", 1},
          {"n_routed_experts", 160},
          {"n_shared_experts", 1},
          {"norm_topk_prob", true},
          {"num_attention_heads", 96},
          {"num_experts_per_tok", 8},
          {"num_hidden_layers", 92},
          {"num_key_value_heads", 8},
          {"num_nextn_predict_layers", 1},
          {"partial_rotary_factor", 0.5},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000},
          {"routed_scaling_factor", 2.5},
          {"tie_word_embeddings", false},
          {"topk_group", 1},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.54.0"},
          {"use_cache", true},
          {"use_qk_norm", true},
          {"vocab_size", 151552}};
}

// Qwen1.5-MoE-A2.7B's config.json as released.
json qwen3_next_base() {
  // Qwen3-Next-80B-A3B-Instruct's config.json.
  return {{"architectures", {"Qwen3NextForCausalLM"}},
          {"model_type", "qwen3_next"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"decoder_sparse_step", 1},
          {"full_attention_interval", 4},
          {"head_dim", 256},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"initializer_range", 0.02},
          {"intermediate_size", 5120},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", 128},
          {"linear_num_key_heads", 16},
          {"linear_num_value_heads", 32},
          {"linear_value_head_dim", 128},
          {"max_position_embeddings", 262144},
          {"mlp_only_layers", json::array()},
          {"moe_intermediate_size", 512},
          {"norm_topk_prob", true},
          {"num_attention_heads", 16},
          {"num_experts", 512},
          {"num_experts_per_tok", 10},
          {"num_hidden_layers", 48},
          {"num_key_value_heads", 2},
          {"output_router_logits", false},
          {"partial_rotary_factor", 0.25},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000000},
          {"router_aux_loss_coef", 0.001},
          {"shared_expert_intermediate_size", 512},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.57.0.dev0"},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

json qwen2_moe_base() {
  return {{"architectures", {"Qwen2MoeForCausalLM"}},
          {"model_type", "qwen2_moe"},
          {"attention_dropout", 0.0},
          {"decoder_sparse_step", 1},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"initializer_range", 0.02},
          {"intermediate_size", 5632},
          {"max_position_embeddings", 8192},
          {"max_window_layers", 21},
          {"moe_intermediate_size", 1408},
          {"norm_topk_prob", false},
          {"num_attention_heads", 16},
          {"num_experts", 60},
          {"num_experts_per_tok", 4},
          {"num_hidden_layers", 24},
          {"num_key_value_heads", 16},
          {"output_router_logits", false},
          {"rms_norm_eps", 1e-06},
          {"rope_theta", 1000000.0},
          {"router_aux_loss_coef", 0.001},
          {"shared_expert_intermediate_size", 5632},
          {"sliding_window", 32768},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.40.0.dev0"},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

// A preset whose vocabulary follows the synthetic tokenizer.
json without_vocab(json c) {
  c.erase("vocab_size");
  return c;
}

json with(json base, const json& fields) {
  for (auto it = fields.begin(); it != fields.end(); ++it) base[it.key()] = it.value();
  return base;
}

// gemma-4-26B-A4B's text_config (docs/gemma4_facts.md); tern synth wraps
// it as the multimodal release's config.json for --arch gemma4 and writes it
// flat for --arch gemma4_text.
json gemma4_base() {
  return {{"architectures", {"Gemma4ForCausalLM"}},
          {"model_type", "gemma4_text"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"attention_k_eq_v", true},
          {"enable_moe_block", true},
          {"final_logit_softcapping", 30.0},
          {"global_head_dim", 512},
          {"head_dim", 256},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"hidden_size", 2816},
          {"hidden_size_per_layer_input", 0},
          {"initializer_range", 0.02},
          {"intermediate_size", 2112},
          {"layer_types",
           [] {
             json types = json::array();  // five sliding layers, then a full one
             for (int l = 0; l < 30; ++l) types.push_back((l + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
             return types;
           }()},
          {"max_position_embeddings", 262144},
          {"moe_intermediate_size", 704},
          {"num_attention_heads", 16},
          {"num_experts", 128},
          {"num_global_key_value_heads", 2},
          {"num_hidden_layers", 30},
          {"num_key_value_heads", 8},
          {"num_kv_shared_layers", 0},
          {"rms_norm_eps", 1e-06},
          {"rope_parameters",
           {{"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}, {"rope_type", "proportional"}}},
            {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}},
          {"sliding_window", 1024},
          {"tie_word_embeddings", true},
          {"top_k_experts", 8},
          {"use_bidirectional_attention", nullptr},
          {"use_cache", true},
          {"use_double_wide_mlp", false},
          {"vocab_size", 262144},
          {"vocab_size_per_layer_input", 262144}};
}

// Gemma 4's small test shapes: 5 layers (sliding, sliding, full, sliding,
// full), a window shorter than the tests' prompts.
json gemma4_tiny() {
  return without_vocab(with(gemma4_base(), {{"hidden_size", 64},
                                            {"num_hidden_layers", 5},
                                            {"layer_types", {"sliding_attention", "sliding_attention", "full_attention"}},
                                            {"num_attention_heads", 4},
                                            {"num_key_value_heads", 2},
                                            {"num_global_key_value_heads", 1},
                                            {"head_dim", 16},
                                            {"global_head_dim", 32},
                                            {"intermediate_size", 96},
                                            {"moe_intermediate_size", 32},
                                            {"num_experts", 8},
                                            {"top_k_experts", 2},
                                            {"sliding_window", 6},
                                            {"max_position_embeddings", 4096}}));
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
      {"gpt_oss", "tiny",
       "4 layers (sliding window 8 on even layers), 8 experts top-4, hidden 64, head_dim 32, YaRN (unit tests)",
       [] {
         json c = with(gpt_oss_base(), {{"hidden_size", 64},
                                        {"num_hidden_layers", 4},
                                        {"num_attention_heads", 4},
                                        {"num_key_value_heads", 2},
                                        {"head_dim", 32},
                                        {"intermediate_size", 64},
                                        {"num_local_experts", 8},
                                        {"experts_per_token", 4},
                                        {"num_experts_per_tok", 4},
                                        {"sliding_window", 8},
                                        {"initial_context_length", 512},
                                        {"max_position_embeddings", 4096}});
         c["rope_scaling"]["factor"] = 8.0;
         c["rope_scaling"]["original_max_position_embeddings"] = 512;
         c.erase("vocab_size");  // follows the tokenizer
         return c;
       }()},
      {"mixtral", "tiny", "2 layers, 8 experts top-2, hidden 64, 4 heads (unit tests)",
       [] {
         json c = with(mixtral_base(), {{"hidden_size", 64},
                                        {"num_hidden_layers", 2},
                                        {"num_attention_heads", 4},
                                        {"num_key_value_heads", 2},
                                        {"intermediate_size", 96},
                                        {"max_position_embeddings", 4096}});
         c.erase("vocab_size");  // follows the tokenizer
         return c;
       }()},
      {"mixtral", "small", "4 layers, 8 experts top-2, hidden 256 (~40 MiB in BF16)",
       [] {
         json c = with(mixtral_base(), {{"hidden_size", 256},
                                        {"num_hidden_layers", 4},
                                        {"num_attention_heads", 8},
                                        {"num_key_value_heads", 2},
                                        {"intermediate_size", 512},
                                        {"max_position_embeddings", 8192}});
         c.erase("vocab_size");
         return c;
       }()},
      {"mixtral", "mixtral-8x7b", "the real Mixtral-8x7B shapes (~87 GiB in BF16)", mixtral_base()},
      {"mixtral", "mixtral-8x22b", "the real Mixtral-8x22B shapes (~262 GiB in BF16)",
       with(mixtral_base(), {{"hidden_size", 6144},
                             {"intermediate_size", 16384},
                             {"num_hidden_layers", 56},
                             {"num_attention_heads", 48},
                             {"max_position_embeddings", 65536},
                             {"router_aux_loss_coef", 0.001}})},
      {"olmoe", "tiny", "2 layers, 8 experts top-2, hidden 64, 4 heads (unit tests)",
       without_vocab(with(olmoe_base(), {{"hidden_size", 64},
                                         {"num_hidden_layers", 2},
                                         {"num_attention_heads", 4},
                                         {"num_key_value_heads", 2},
                                         {"intermediate_size", 32},
                                         {"num_experts", 8},
                                         {"num_experts_per_tok", 2}}))},
      {"olmoe", "small", "4 layers, 32 experts top-8, hidden 256 (~50 MiB in BF16)",
       without_vocab(with(olmoe_base(), {{"hidden_size", 256},
                                         {"num_hidden_layers", 4},
                                         {"num_attention_heads", 8},
                                         {"num_key_value_heads", 8},
                                         {"intermediate_size", 256},
                                         {"num_experts", 32},
                                         {"num_experts_per_tok", 8}}))},
      {"olmoe", "olmoe-1b-7b", "the real OLMoE-1B-7B shapes (~13 GiB in BF16)", olmoe_base()},
      {"qwen3_next", "tiny",
       "4 layers (3 Gated DeltaNet + 1 gated attention), 8 experts top-2 + a shared expert, hidden 64 (unit tests)",
       without_vocab(with(qwen3_next_base(), {{"hidden_size", 64},
                                              {"num_hidden_layers", 4},
                                              {"num_attention_heads", 4},
                                              {"num_key_value_heads", 2},
                                              {"head_dim", 16},
                                              {"linear_num_key_heads", 2},
                                              {"linear_num_value_heads", 4},
                                              {"linear_key_head_dim", 8},
                                              {"linear_value_head_dim", 8},
                                              {"intermediate_size", 96},
                                              {"moe_intermediate_size", 32},
                                              {"shared_expert_intermediate_size", 48},
                                              {"num_experts", 8},
                                              {"num_experts_per_tok", 2},
                                              {"max_position_embeddings", 4096}}))},
      {"qwen3_next", "small",
       "4 layers (3 Gated DeltaNet + 1 gated attention), 32 experts top-4 + a shared expert, hidden 256 (~60 MiB in "
       "BF16)",
       without_vocab(with(qwen3_next_base(), {{"hidden_size", 256},
                                              {"num_hidden_layers", 4},
                                              {"num_attention_heads", 8},
                                              {"num_key_value_heads", 2},
                                              {"head_dim", 64},
                                              {"linear_num_key_heads", 4},
                                              {"linear_num_value_heads", 8},
                                              {"linear_key_head_dim", 32},
                                              {"linear_value_head_dim", 32},
                                              {"intermediate_size", 512},
                                              {"moe_intermediate_size", 256},
                                              {"shared_expert_intermediate_size", 256},
                                              {"num_experts", 32},
                                              {"num_experts_per_tok", 4},
                                              {"max_position_embeddings", 32768}}))},
      {"qwen3_next", "qwen3-next-80b-a3b", "the real Qwen3-Next-80B-A3B shapes (~149 GiB in BF16)", qwen3_next_base()},
      {"gemma4", "tiny",
       "5 layers (3 sliding with a window of 6, 2 full with attention_k_eq_v), 8 experts top-2 beside a dense GeGLU "
       "MLP, hidden 64 (unit tests)",
       gemma4_tiny()},
      {"gemma4", "small",
       "6 layers (5 sliding with a window of 64, 1 full), 32 experts top-4 beside a dense GeGLU MLP, hidden 256 "
       "(~40 MiB in BF16)",
       without_vocab(with(gemma4_base(), {{"hidden_size", 256},
                                          {"num_hidden_layers", 6},
                                          {"num_attention_heads", 8},
                                          {"num_key_value_heads", 4},
                                          {"num_global_key_value_heads", 2},
                                          {"head_dim", 32},
                                          {"global_head_dim", 64},
                                          {"intermediate_size", 256},
                                          {"moe_intermediate_size", 256},
                                          {"num_experts", 32},
                                          {"top_k_experts", 4},
                                          {"sliding_window", 64},
                                          {"max_position_embeddings", 32768}}))},
      {"gemma4", "gemma4-26b-a4b", "the real gemma-4-26B-A4B text shapes (~48 GiB in BF16)", gemma4_base()},
      {"gemma4_text", "tiny", "gemma4's tiny preset in the text-only Gemma4ForCausalLM layout (unit tests)",
       gemma4_tiny()},
      {"qwen2_moe", "tiny", "2 layers, 8 experts top-2 + a shared expert, hidden 64 (unit tests)",
       without_vocab(with(qwen2_moe_base(), {{"hidden_size", 64},
                                             {"num_hidden_layers", 2},
                                             {"num_attention_heads", 4},
                                             {"num_key_value_heads", 2},
                                             {"intermediate_size", 128},
                                             {"moe_intermediate_size", 32},
                                             {"shared_expert_intermediate_size", 96},
                                             {"num_experts", 8},
                                             {"num_experts_per_tok", 2},
                                             {"max_position_embeddings", 4096}}))},
      {"qwen2_moe", "small", "4 layers, 30 experts top-4 + a shared expert, hidden 256 (~50 MiB in BF16)",
       without_vocab(with(qwen2_moe_base(), {{"hidden_size", 256},
                                             {"num_hidden_layers", 4},
                                             {"num_attention_heads", 8},
                                             {"num_key_value_heads", 2},
                                             {"intermediate_size", 512},
                                             {"moe_intermediate_size", 256},
                                             {"shared_expert_intermediate_size", 512},
                                             {"num_experts", 30},
                                             {"num_experts_per_tok", 4}}))},
      {"qwen2_moe", "qwen1.5-moe-a2.7b", "the real Qwen1.5-MoE-A2.7B shapes (~27 GiB in BF16)", qwen2_moe_base()},
      {"qwen2_moe", "qwen2-57b-a14b", "the real Qwen2-57B-A14B shapes (~106 GiB in BF16)",
       with(qwen2_moe_base(), {{"hidden_size", 3584},
                               {"intermediate_size", 18944},
                               {"num_hidden_layers", 28},
                               {"num_attention_heads", 28},
                               {"num_key_value_heads", 4},
                               {"moe_intermediate_size", 2560},
                               {"shared_expert_intermediate_size", 20480},
                               {"num_experts", 64},
                               {"num_experts_per_tok", 8},
                               {"max_position_embeddings", 131072},
                               {"max_window_layers", 28},
                               {"sliding_window", 131072}})},
      {"deepseek_v3", "tiny",
       "3 layers (1 dense), MLA (q rank 32, kv rank 32, 4 heads), 16 experts in 4 groups top-4 + a shared "
       "expert, hidden 64, YaRN x8 (unit tests)",
       [] {
         json c = with(deepseek_v3_base(), {{"hidden_size", 64},
                                            {"num_hidden_layers", 3},
                                            {"first_k_dense_replace", 1},
                                            {"num_attention_heads", 4},
                                            {"num_key_value_heads", 4},
                                            {"q_lora_rank", 32},
                                            {"kv_lora_rank", 32},
                                            {"qk_nope_head_dim", 16},
                                            {"qk_rope_head_dim", 8},
                                            {"v_head_dim", 16},
                                            {"intermediate_size", 128},
                                            {"moe_intermediate_size", 32},
                                            {"n_routed_experts", 16},
                                            {"n_group", 4},
                                            {"topk_group", 2},
                                            {"num_experts_per_tok", 4},
                                            {"max_position_embeddings", 4096}});
         c["rope_scaling"]["factor"] = 8;
         c["rope_scaling"]["original_max_position_embeddings"] = 512;
         c.erase("vocab_size");  // follows the tokenizer
         return c;
       }()},
      {"deepseek_v3", "small",
       "4 layers (1 dense), MLA (q rank 96, kv rank 64, 8 heads), 32 experts in 4 groups top-6 + a shared "
       "expert, hidden 256 (~60 MiB in BF16)",
       [] {
         json c = with(deepseek_v3_base(), {{"hidden_size", 256},
                                            {"num_hidden_layers", 4},
                                            {"first_k_dense_replace", 1},
                                            {"num_attention_heads", 8},
                                            {"num_key_value_heads", 8},
                                            {"q_lora_rank", 96},
                                            {"kv_lora_rank", 64},
                                            {"qk_nope_head_dim", 32},
                                            {"qk_rope_head_dim", 16},
                                            {"v_head_dim", 32},
                                            {"intermediate_size", 512},
                                            {"moe_intermediate_size", 256},
                                            {"n_routed_experts", 32},
                                            {"n_group", 4},
                                            {"topk_group", 2},
                                            {"num_experts_per_tok", 6},
                                            {"max_position_embeddings", 8192}});
         c["rope_scaling"]["factor"] = 8;
         c["rope_scaling"]["original_max_position_embeddings"] = 1024;
         c.erase("vocab_size");
         return c;
       }()},
      {"deepseek_v3", "deepseek-v3", "the real DeepSeek-V3/R1 shapes (~1.25 TiB in BF16)", deepseek_v3_base()},
      // Kimi-K2's text shapes (its tiktoken tokenizer is not one Tern reads yet).
      {"deepseek_v3", "kimi-k2", "the real Kimi-K2 shapes (~1.9 TiB in BF16)",
       with(deepseek_v3_base(), {{"first_k_dense_replace", 1},
                                 {"num_attention_heads", 64},
                                 {"num_key_value_heads", 64},
                                 {"n_routed_experts", 384},
                                 {"n_group", 1},
                                 {"topk_group", 1},
                                 {"routed_scaling_factor", 2.827},
                                 {"rope_theta", 50000.0},
                                 {"max_position_embeddings", 131072},
                                 {"rope_scaling",
                                  {{"beta_fast", 1.0},
                                   {"beta_slow", 1.0},
                                   {"factor", 32.0},
                                   {"mscale", 1.0},
                                   {"mscale_all_dim", 1.0},
                                   {"original_max_position_embeddings", 4096},
                                   {"type", "yarn"}}},
                                 {"vocab_size", 163840}})},
      {"glm4_moe", "tiny",
       "3 layers (1 dense), 16 experts top-4 + a shared expert, hidden 64, 4 heads (2 kv) of 32 with 16 rotary "
       "dims, q/k norm and biases (unit tests)",
       without_vocab(with(glm4_moe_base(), {{"hidden_size", 64},
                                            {"num_hidden_layers", 3},
                                            {"first_k_dense_replace", 1},
                                            {"num_attention_heads", 4},
                                            {"num_key_value_heads", 2},
                                            {"head_dim", 32},
                                            {"intermediate_size", 128},
                                            {"moe_intermediate_size", 32},
                                            {"n_routed_experts", 16},
                                            {"num_experts_per_tok", 4},
                                            {"max_position_embeddings", 4096}}))},
      {"glm4_moe", "small", "4 layers (1 dense), 32 experts top-6 + a shared expert, hidden 256 (~60 MiB in BF16)",
       without_vocab(with(glm4_moe_base(), {{"hidden_size", 256},
                                            {"num_hidden_layers", 4},
                                            {"first_k_dense_replace", 1},
                                            {"num_attention_heads", 8},
                                            {"num_key_value_heads", 2},
                                            {"head_dim", 64},
                                            {"intermediate_size", 512},
                                            {"moe_intermediate_size", 256},
                                            {"n_routed_experts", 32},
                                            {"num_experts_per_tok", 6},
                                            {"max_position_embeddings", 8192}}))},
      {"glm4_moe", "glm-4.5", "the real GLM-4.5 shapes (~670 GiB in BF16)", glm4_moe_base()},
      {"glm4_moe", "glm-4.5-air", "the real GLM-4.5-Air shapes (~205 GiB in BF16)",
       with(glm4_moe_base(), {{"hidden_size", 4096},
                              {"intermediate_size", 10944},
                              {"num_hidden_layers", 46},
                              {"first_k_dense_replace", 1},
                              {"moe_intermediate_size", 1408},
                              {"n_routed_experts", 128},
                              {"use_qk_norm", false}})},
      {"gpt_oss", "gpt-oss-20b", "the real gpt-oss-20b shapes (~12.8 GiB as released: MXFP4 experts, BF16 trunk)",
       gpt_oss_base()},
      {"gpt_oss", "gpt-oss-120b", "the real gpt-oss-120b shapes (~60.8 GiB as released: MXFP4 experts, BF16 trunk)",
       with(gpt_oss_base(), {{"num_hidden_layers", 36}, {"num_local_experts", 128}})},
  };
  return presets;
}

const SynthFamily& find_synth_family(const std::string& architecture) {
  static const SynthFamily qwen3{
      SyntheticSpecials::Qwen3,
      {{"bos_token_id", "<|endoftext|>"}, {"eos_token_id", "<|im_end|>"}},
      {"<|im_end|>", "<|endoftext|>"},
      "<|endoftext|>",
      "<|endoftext|>",
      {{"do_sample", true}, {"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.95}, {"transformers_version", "4.51.0"}},
      {}};
  static const SynthFamily gpt_oss{
      SyntheticSpecials::Harmony,
      {{"eos_token_id", "<|return|>"}, {"pad_token_id", "<|endoftext|>"}},
      {"<|return|>", "<|endoftext|>", "<|call|>"},
      "<|startoftext|>",
      "<|endoftext|>",
      {{"do_sample", true}, {"transformers_version", "4.55.0.dev0"}},
      {{"num_experts", {"num_local_experts"}},
       {"moe_intermediate_size", {"intermediate_size"}},
       {"num_experts_per_tok", {"num_experts_per_tok", "experts_per_token"}}}};
  // Mistral's SentencePiece-style BPE: <s> bos, </s> eos, no pad.
  static const SynthFamily mixtral{
      SyntheticSpecials::Mistral,
      {{"bos_token_id", "<s>"}, {"eos_token_id", "</s>"}},
      {"</s>"},
      "<s>",
      "",
      {{"transformers_version", "4.36.0.dev0"}},
      {{"num_experts", {"num_local_experts"}}, {"moe_intermediate_size", {"intermediate_size"}}}};
  // OLMoE: GPT-NeoX-style byte-level BPE; <|endoftext|> ends text, <|padding|> pads.
  static const SynthFamily olmoe{
      SyntheticSpecials::Olmoe,
      {{"eos_token_id", "<|endoftext|>"}, {"pad_token_id", "<|padding|>"}},
      {"<|endoftext|>"},
      "<|endoftext|>",
      "<|padding|>",
      {{"transformers_version", "4.43.0.dev0"}},
      {{"moe_intermediate_size", {"intermediate_size"}}}};
  // Qwen1.5/Qwen2 chat models: ChatML, <|im_end|> and <|endoftext|> end a reply.
  static const SynthFamily qwen2_moe{
      SyntheticSpecials::Qwen2,
      {{"bos_token_id", "<|endoftext|>"}, {"eos_token_id", "<|endoftext|>"}},
      {"<|im_end|>", "<|endoftext|>"},
      "<|endoftext|>",
      "<|endoftext|>",
      {{"transformers_version", "4.40.0.dev0"}},
      {}};
  // DeepSeek-V3: byte-level BPE with <｜begin▁of▁sentence｜> (0) and
  // <｜end▁of▁sentence｜> (1); its generation_config names no pad.
  static const SynthFamily deepseek_v3{
      SyntheticSpecials::DeepseekV3,
      {{"bos_token_id", "<｜begin▁of▁sentence｜>"}, {"eos_token_id", "<｜end▁of▁sentence｜>"}},
      {"<｜end▁of▁sentence｜>"},
      "<｜begin▁of▁sentence｜>",
      "",
      {{"do_sample", true}, {"temperature", 0.3}, {"top_p", 0.95}, {"transformers_version", "4.46.3"}},
      {{"num_experts", {"n_routed_experts"}}}};
  // GLM-4.5: byte-level BPE; no bos (the chat template writes [gMASK]<sop>);
  // <|endoftext|>, <|user|> and <|observation|> end a reply, as its
  // config.json and generation_config.json list them; <|endoftext|> pads.
  static const SynthFamily glm4_moe{
      SyntheticSpecials::Glm45,
      {{"eos_token_id", "<|endoftext|>"},
       {"eos_token_id", "<|user|>"},
       {"eos_token_id", "<|observation|>"},
       {"pad_token_id", "<|endoftext|>"}},
      {"<|endoftext|>", "<|user|>", "<|observation|>"},
      "",
      "<|endoftext|>",
      {{"transformers_version", "4.54.0"}},
      {{"num_experts", {"n_routed_experts"}}}};
  // Gemma 4: Gemma's SentencePiece-style BPE; <eos> and <turn|> end a
  // reply (config.json's eos_token_id [1, 106]), generation_config adds
  // <|tool_response>; <pad> pads.
  static const SynthFamily gemma4{
      SyntheticSpecials::Gemma4,
      {{"bos_token_id", "<bos>"}, {"eos_token_id", "<eos>"}, {"eos_token_id", "<turn|>"}, {"pad_token_id", "<pad>"}},
      {"<eos>", "<turn|>", "<|tool_response>"},
      "<bos>",
      "<pad>",
      {{"do_sample", true}, {"temperature", 1.0}, {"top_k", 64}, {"top_p", 0.95}, {"transformers_version", "5.5.0.dev0"}},
      {{"num_experts_per_tok", {"top_k_experts"}}}};
  if (architecture == "gpt_oss") return gpt_oss;
  if (architecture == "glm4_moe") return glm4_moe;
  if (architecture == "deepseek_v3") return deepseek_v3;
  if (architecture == "olmoe") return olmoe;
  if (architecture == "qwen2_moe") return qwen2_moe;
  if (architecture == "mixtral") return mixtral;
  if (architecture == "gemma4" || architecture == "gemma4_text") return gemma4;
  return qwen3;
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
