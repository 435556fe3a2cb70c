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
  bool truncate = true;  // yarn: round the correction range to whole dims (gpt_oss sets false)
};

// Sane ranges for config.json values. A model directory is untrusted input:
// every count and dimension is checked against these before anything is
// sized or looped over from it, so no value can make Tern allocate or loop
// without bound. Each bound is well above the largest released model
// (noted), so real checkpoints never meet them.
namespace config_limits {
inline constexpr int64_t kMaxVocab = int64_t{1} << 22;        // 4 Mi ids; Gemma 3: 262,144
inline constexpr int64_t kMaxHidden = int64_t{1} << 16;       // 65,536; Llama 3.1 405B: 16,384
inline constexpr int64_t kMaxLayers = 1024;                   // Llama 3.1 405B: 126
inline constexpr int64_t kMaxHeads = 1024;                    // DeepSeek-V3: 128
inline constexpr int64_t kMaxHeadDim = 1024;                  // Gemma 2: 256
inline constexpr int64_t kMaxAttentionWidth = int64_t{1} << 17;  // heads x head_dim; 405B: 16,384
inline constexpr int64_t kMaxFfn = int64_t{1} << 20;          // (moe_)intermediate_size; 405B: 53,248
inline constexpr int64_t kMaxExperts = 8192;                  // Qwen3-Next: 512
inline constexpr int64_t kMaxExpertRecords = int64_t{1} << 18;  // MoE layers x experts; Kimi K2: 23,040
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;    // 16 Mi; Llama 4 Scout: 10 Mi
}  // namespace config_limits

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

  // Attention variants.
  // Keys a sliding-window layer attends to, the query's own included: query
  // i sees keys j with i - j < sliding_window (0: no layer slides).
  int64_t sliding_window = 0;
  // Per layer, whether it uses the sliding window (empty: none does).
  std::vector<bool> sliding_layers;
  // A learned logit per query head joins every softmax row (gpt_oss "sinks").
  bool attention_sinks = false;
  // > 0: q, k and v are clamped to [-clip_qkv, clip_qkv] (OLMoE; 0: no clamp).
  double clip_qkv = 0;
  // Leading dims of each head that RoPE rotates (GLM-4.5's partial rotary:
  // head_dim x partial_rotary_factor); 0: all of head_dim.
  int64_t rotary_dim = 0;
  // Per-head RMSNorm of q and k before RoPE (GLM-4.5's use_qk_norm).
  bool qk_norm = false;

  // Dense MLP (layers that are not MoE).
  int64_t intermediate_size = 0;

  // Mixture of experts.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // > 0: every MoE layer also has a shared expert this wide, gated per token
  // by a sigmoid (Qwen2-MoE).
  int64_t shared_expert_intermediate_size = 0;
  // Expert activation: 0 is SwiGLU, silu(gate) * up. > 0 is gpt_oss's clamped
  // variant: gate = min(gate, limit), up = clamp(up, -limit, limit),
  // (up + 1) * gate * sigmoid(alpha * gate).
  double swiglu_limit = 0;
  double swiglu_alpha = 1.702;
  // Whether the shared expert is gated per token by sigmoid(gate . x)
  // (Qwen2-MoE); DeepSeek-V3's shared experts are added ungated.
  bool shared_expert_gated = true;

  // Router rule: "softmax" (softmax over the logits, then top-k; Qwen, OLMoE)
  // or DeepSeek-V3's "sigmoid_grouped" (noaux_tc): sigmoid scores, selection
  // by score + e_score_correction_bias among the topk_group best of n_group
  // expert groups (a group's score: the sum of its two best), weights the
  // chosen unbiased scores (renormalised when norm_topk_prob) times
  // routed_scaling_factor.
  std::string router_scoring = "softmax";
  int64_t n_group = 1, topk_group = 1;
  double routed_scaling_factor = 1.0;

  // Multi-head latent attention (DeepSeek-V3): q through a low-rank
  // projection (q_lora_rank; 0: a plain q_proj), keys and values from one
  // compressed latent of kv_lora_rank floats per position plus a RoPE key of
  // qk_rope_head_dim shared by all heads; per head qk_nope_head_dim +
  // qk_rope_head_dim query/key dims (head_dim holds their sum) and
  // v_head_dim value dims. The KV cache keeps only the latent and the rope key.
  struct Mla {
    int64_t q_lora_rank = 0;
    int64_t kv_lora_rank = 0;  // > 0: the model attends through MLA
    int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    bool rope_interleave = true;  // rope dims paired (2i, 2i + 1), as released
    bool present() const { return kv_lora_rank > 0; }
  } mla;

  // Gated DeltaNet linear attention (Qwen3-Next): on the layers it marks, a
  // layer mixes tokens through a causal depthwise conv1d of conv_kernel taps
  // over q|k|v and the gated delta rule, keeping a fixed-size state per
  // sequence (the last conv_kernel - 1 inputs and a key_head_dim x
  // value_head_dim matrix per value head) instead of keys and values.
  struct LinearAttention {
    int64_t num_key_heads = 0, num_value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
    std::vector<bool> layers;  // per layer: linear attention (else full attention)
    bool present() const { return num_key_heads > 0; }
    int64_t key_dim() const { return num_key_heads * key_head_dim; }
    int64_t value_dim() const { return num_value_heads * value_head_dim; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    // Floats of one layer's state: conv inputs, then the delta-rule matrices.
    int64_t state_floats() const {
      return (conv_kernel - 1) * conv_dim() + num_value_heads * key_head_dim * value_head_dim;
    }
  } linear_attention;
  // Full attention with a per-head sigmoid output gate: q_proj yields
  // [query, gate] per head, the attention output is multiplied by
  // sigmoid(gate) before o_proj (Qwen3-Next).
  bool attention_output_gate = false;
  // RMSNorm weights stored zero-centred: the scale is 1 + w (Qwen3-Next's
  // decoder norms and q/k norms).
  bool zero_centred_norms = false;

  // Gemma 4: its full-attention layers have their own head shape
  // (global_head_dim; 0: head_dim) and, with attention_k_eq_v, their own KV
  // heads (num_global_key_value_heads) and no v_proj: the values are the raw
  // key projection. Their RoPE is "proportional": the first
  // full_rotary_pairs of global_head_dim / 2 pairs rotate, at frequencies
  // computed over the whole head (full_rope_theta), the rest pass through.
  int64_t global_head_dim = 0;
  int64_t num_global_kv_heads = 0;
  bool attention_k_eq_v = false;
  double full_rope_theta = 0;
  int64_t full_rotary_pairs = 0;
  // Gemma's sandwich layers: attention and feed-forward outputs RMS-normed
  // before they join the residual, a dense GeGLU MLP beside the routed
  // experts (each branch with its own pre/post norms), each layer's output
  // times a stored layer_scalar.
  bool sandwich_norms = false;
  // The feed-forward activation: "silu" (SwiGLU) or "gelu_pytorch_tanh"
  // (GeGLU, gelu with the tanh approximation).
  std::string hidden_act = "silu";
  // > 0: the embeddings are multiplied by this (Gemma: sqrt(hidden_size)).
  double embedding_scale = 0;
  // > 0: logits = cap * tanh(logits / cap) (Gemma's final_logit_softcapping).
  double final_logit_softcapping = 0;
  // Multimodal checkpoints keep the text model's weights under another
  // prefix ("model.language_model."): the checkpoint's names start with this
  // where Tern's start with "model." (empty: the names are Tern's).
  std::string weight_prefix;

  // Fine-grained FP8 weights (quantization_config quant_method "fp8", as
  // DeepSeek-V3/R1, Kimi-K2 and Qwen3's -FP8 releases ship): a projection is
  // F8_E4M3 [out, in] with "<name>_scale_inv" [ceil(out / rows), ceil(in /
  // cols)], value = e4m3 x scale of its block. 0: no FP8 weights. The
  // installer dequantizes them; the engine never sees FP8.
  struct Fp8Blocks {
    int64_t rows = 0, cols = 0;
    bool present() const { return rows > 0; }
  } fp8;

  nlohmann::json raw;  // the config.json as read

  // Whether layer `layer` routes to experts (else it has a dense MLP).
  bool layer_is_moe(int64_t layer) const;
  // Whether layer `layer` attends through the sliding window.
  bool layer_is_sliding(int64_t layer) const;
  // Whether layer `layer` is a linear-attention (Gated DeltaNet) layer.
  bool layer_is_linear(int64_t layer) const;
  // The attention head shape of a layer (Gemma 4's full layers differ).
  int64_t layer_head_dim(int64_t layer) const;
  int64_t layer_kv_heads(int64_t layer) const;
  // Whether a layer's values are its raw key projection (no v_proj).
  bool layer_values_are_keys(int64_t layer) const;
  int64_t num_moe_layers() const;
};

// Reads and validates config.json (a file, or a directory containing one).
// Unknown model_type -> "unsupported architecture X; supported: ...".
ModelConfig load_model_config(const std::filesystem::path& path);
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

}  // namespace tern
