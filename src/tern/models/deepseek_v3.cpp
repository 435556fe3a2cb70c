// DeepSeek-V3 forward pass (model_type "deepseek_v3") on the shared decoder
// (decoder_model.h; the config and tensors: format/arch_deepseek_v3.cpp).
// Per layer:
//   x += mla(rmsnorm(x))          multi-head latent attention over a latent
//                                 KV cache (mla_attention.h), YaRN RoPE on
//                                 the rope dims
//   x += moe(rmsnorm(x))          sigmoid scores, group-limited top-k on
//                                 score + e_score_correction_bias, weights
//                                 renormalised x routed_scaling_factor, plus
//                                 the shared experts (ungated), computed while
//                                 the routed reads are in flight
//     or mlp(rmsnorm(x))          the first first_k_dense_replace layers
// then logits = lm_head(rmsnorm(x)).
// YaRN (transformers v4.57 _compute_yarn_parameters): rope_scaling's factor
// as given, the correction range over original_max_position_embeddings (else
// max_position_embeddings), and the cos/sin factor mscale(factor, mscale) /
// mscale(factor, mscale_all_dim); the softmax scale gains
// mscale(factor, mscale_all_dim)^2. The latent norms use eps 1e-6.
#include <cmath>

#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class DeepseekV3 final : public DecoderModel {
 public:
  DeepseekV3(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const ModelConfig& c = cfg_;
    const ModelConfig::Mla& m = c.mla;
    RopeScaling rope;
    double softmax_mscale = 1.0;
    if (c.rope_scaling) {
      const RopeScalingConfig& rs = *c.rope_scaling;
      if (rs.type != "yarn") fail("rope_scaling type '{}' is not implemented for deepseek_v3", rs.type);
      rope.kind = RopeScaling::Kind::Yarn;
      rope.original_max_positions =
          rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings : c.max_position_embeddings;
      rope.factor = rs.factor;
      rope.beta_fast = rs.beta_fast;
      rope.beta_slow = rs.beta_slow;
      rope.mscale = rs.mscale;
      rope.mscale_all_dim = rs.mscale_all_dim;
      rope.truncate = rs.truncate;
      if (rs.mscale_all_dim != 0) softmax_mscale = yarn_mscale(rs.factor, rs.mscale_all_dim);
    }
    inv_freq_ = rope_inv_freq(m.qk_rope_head_dim, c.rope_theta, rope);
    MlaShape& ms = mla_shape_;
    ms.hidden = c.hidden_size;
    ms.n_heads = c.num_heads;
    ms.kv_lora_rank = m.kv_lora_rank;
    ms.nope = m.qk_nope_head_dim;
    ms.rope = m.qk_rope_head_dim;
    ms.v = m.v_head_dim;
    ms.scale = static_cast<float>(softmax_mscale * softmax_mscale /
                                  std::sqrt(static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim)));
    ms.rope_inv_freq = inv_freq_.data();
    ms.rope_factor = static_cast<float>(rope_attention_factor(rope));
    ms.rope_interleave = m.rope_interleave;
    shape_ = default_attention_shape();
    for (int64_t l = 0; l < c.num_layers; ++l) layers_.push_back(load_layer(l));
    finish_loading();
  }

 private:
  DecoderLayer load_layer(int64_t l) const {
    const std::string p = layer_prefix(l), a = p + "self_attn.";
    const bool bias = cfg_.attention_bias;
    DecoderLayer L = layer_with_norms(l);
    MlaWeights& w = L.mla;
    if (cfg_.mla.q_lora_rank > 0) {
      w.q_a = w_.matrix(a + "q_a_proj.weight");
      if (bias) w.q_a_bias = w_.vector(a + "q_a_proj.bias");
      w.q_a_norm = w_.vector(a + "q_a_layernorm.weight");
      w.q_b = w_.matrix(a + "q_b_proj.weight");
    } else {
      w.q = w_.matrix(a + "q_proj.weight");
    }
    w.kv_a = w_.matrix(a + "kv_a_proj_with_mqa.weight");
    if (bias) w.kv_a_bias = w_.vector(a + "kv_a_proj_with_mqa.bias");
    w.kv_a_norm = w_.vector(a + "kv_a_layernorm.weight");
    w.kv_b = w_.matrix(a + "kv_b_proj.weight");
    w.o = w_.matrix(a + "o_proj.weight");
    if (bias) w.o_bias = w_.vector(a + "o_proj.bias");
    load_grouped_moe_or_dense(L, l);
    return L;
  }
};

}  // namespace

std::unique_ptr<Model> make_deepseek_v3(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                        const ModelOptions& options) {
  return std::make_unique<DeepseekV3>(model, cache, pool, options);
}

}  // namespace tern
