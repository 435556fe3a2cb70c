// Gemma 4 forward pass (model_type "gemma4" / "gemma4_text"; gemma-4-26B-A4B)
// on the shared decoder (decoder_model.h; config and tensors:
// format/arch_gemma4.cpp). Per layer (a sandwich layer, DecoderLayer):
//   x += post_attention_layernorm(attention(input_layernorm(x)))
//        sliding layers: head_dim, num_key_value_heads, default RoPE, a
//        window of sliding_window keys; full layers: global_head_dim, with
//        attention_k_eq_v num_global_key_value_heads and v = the raw k
//        projection, proportional RoPE; per-head q/k RMSNorm, v RMS-normed
//        without a weight, softmax scale 1
//   x += post_feedforward_layernorm(
//          post_feedforward_layernorm_1(geglu_mlp(pre_feedforward_layernorm(x)))
//        + post_feedforward_layernorm_2(experts(pre_feedforward_layernorm_2(x))))
//        routed by router.proj(rmsnorm(x) * router.scale / sqrt(hidden)):
//        softmax, top-k, renormalised, times router.per_expert_scale
//   x *= layer_scalar
// with the embeddings times sqrt(hidden), then logits =
// softcap(lm_head(norm(x))). The dense branch runs while the experts' reads
// are in flight.
#include <cmath>

#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Gemma4 final : public DecoderModel {
 public:
  Gemma4(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const ModelConfig& c = cfg_;
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = default_attention_shape();
    shape_.scale = 1.0f;
    // Proportional RoPE: frequencies over the whole global head, the pairs
    // past full_rotary_pairs at frequency 0 (they pass through unrotated).
    full_inv_freq_ = rope_inv_freq(c.global_head_dim, c.full_rope_theta);
    for (size_t i = static_cast<size_t>(c.full_rotary_pairs); i < full_inv_freq_.size(); ++i) full_inv_freq_[i] = 0;
    ffn_.activation = GateActivation::GeluTanh;
    // The router's input scale: weightless RMSNorm x router.scale x hidden^-1/2.
    const auto inv_sqrt_hidden = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hidden_size)));
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      AttentionShape& s = shapes_.emplace_back(shape_);
      if (!c.layer_is_sliding(l)) {
        s.head_dim = c.layer_head_dim(l);
        s.n_kv_heads = c.layer_kv_heads(l);
        s.rope_inv_freq = full_inv_freq_.data();
      }
      DecoderLayer L;
      L.input_norm = norm_weight(p + "input_layernorm.weight");
      L.attn_out_norm = norm_weight(p + "post_attention_layernorm.weight");
      L.post_norm = norm_weight(p + "pre_feedforward_layernorm.weight");
      L.dense_out_norm = norm_weight(p + "post_feedforward_layernorm_1.weight");
      L.moe_in_norm = norm_weight(p + "pre_feedforward_layernorm_2.weight");
      L.moe_out_norm = norm_weight(p + "post_feedforward_layernorm_2.weight");
      L.sandwich_out_norm = norm_weight(p + "post_feedforward_layernorm.weight");
      L.layer_scalar = *w_.vector(p + "layer_scalar");
      L.window = c.layer_is_sliding(l) ? c.sliding_window : 0;
      const std::string a = p + "self_attn.";
      L.attn.q = w_.matrix(a + "q_proj.weight");
      L.attn.k = w_.matrix(a + "k_proj.weight");
      L.attn.values_are_keys = c.layer_values_are_keys(l);
      if (!L.attn.values_are_keys) L.attn.v = w_.matrix(a + "v_proj.weight");
      L.attn.o = w_.matrix(a + "o_proj.weight");
      if (c.attention_bias) {
        L.attn.q_bias = w_.vector(a + "q_proj.bias");
        L.attn.k_bias = w_.vector(a + "k_proj.bias");
        if (!L.attn.values_are_keys) L.attn.v_bias = w_.vector(a + "v_proj.bias");
        L.attn.o_bias = w_.vector(a + "o_proj.bias");
      }
      L.attn.q_norm = norm_weight(a + "q_norm.weight");
      L.attn.k_norm = norm_weight(a + "k_norm.weight");
      L.attn.v_norm_unit = true;
      load_dense_mlp(L, p + "mlp.");
      L.moe.router = w_.matrix(p + "router.proj.weight");
      L.moe.routing = {c.num_experts, c.num_experts_per_tok, true, RouterScoring::SoftmaxThenTopK};
      L.moe.routing.expert_scale = w_.vector(p + "router.per_expert_scale");
      L.moe.experts = experts_of(l);
      const float* scale = w_.vector(p + "router.scale");
      std::vector<float>& router_norm = router_norms_.emplace_back(static_cast<size_t>(c.hidden_size));
      for (size_t i = 0; i < router_norm.size(); ++i) router_norm[i] = scale[i] * inv_sqrt_hidden;
      L.moe.input_norm = router_norm.data();
      layers_.push_back(L);
    }
    for (size_t l = 0; l < layers_.size(); ++l) layers_[l].shape = &shapes_[l];
    finish_loading();
  }

 private:
  std::vector<float> full_inv_freq_;
  std::deque<AttentionShape> shapes_;             // per layer (stable addresses)
  std::deque<std::vector<float>> router_norms_;   // per layer: router.scale / sqrt(hidden)
};

}  // namespace

std::unique_ptr<Model> make_gemma4(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                   const ModelOptions& options) {
  return std::make_unique<Gemma4>(model, cache, pool, options);
}

}  // namespace tern
