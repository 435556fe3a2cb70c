// Qwen3-Next forward pass (model_type "qwen3_next") on the shared decoder
// (decoder_model.h; the config and tensors: format/arch_qwen3_next.cpp).
// Per layer:
//   x += gated_deltanet(rmsnorm(x))   linear_attention layers: Gated DeltaNet
//                                     over a per-sequence state (gated_deltanet.h)
//     or attention(rmsnorm(x))        full_attention layers: per-head q/k
//                                     RMSNorm, RoPE on the leading rotary_dim
//                                     dims, GQA, a sigmoid output gate per head
//   x += moe(rmsnorm(x))              softmax top-k routed experts plus the
//                                     sigmoid-gated shared expert (Qwen2-MoE's)
//     or mlp(rmsnorm(x))              on mlp_only_layers
// then logits = lm_head(rmsnorm(x)). Every RMSNorm but the gated one scales
// by 1 + w (zero-centred weights).
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Qwen3Next final : public DecoderModel {
 public:
  Qwen3Next(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    if (cfg_.rope_scaling && cfg_.rope_scaling->type != "default")
      fail("rope_scaling type '{}' is not implemented for qwen3_next", cfg_.rope_scaling->type);
    inv_freq_ = rope_inv_freq(cfg_.rotary_dim, cfg_.rope_theta);
    shape_ = default_attention_shape();
    shape_.rotary_dim = cfg_.rotary_dim;
    const ModelConfig::LinearAttention& la = cfg_.linear_attention;
    deltanet_shape_ = {cfg_.hidden_size,
                       la.num_key_heads,
                       la.num_value_heads,
                       la.key_head_dim,
                       la.value_head_dim,
                       la.conv_kernel,
                       static_cast<float>(cfg_.rms_norm_eps)};
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L = layer_with_norms(l);
      if (cfg_.layer_is_linear(l)) {
        const std::string a = p + "linear_attn.";
        DeltaNetWeights& d = L.deltanet;
        d.qkvz = w_.matrix(a + "in_proj_qkvz.weight");
        d.ba = w_.matrix(a + "in_proj_ba.weight");
        d.out = w_.matrix(a + "out_proj.weight");
        d.conv = w_.vector(a + "conv1d.weight");
        d.dt_bias = w_.vector(a + "dt_bias");
        d.a_log = w_.vector(a + "A_log");
        d.norm = w_.vector(a + "norm.weight");
      } else {
        load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias,
                                   cfg_.attention_bias);
        L.attn.output_gate = true;
        L.attn.q_norm = norm_weight(p + "self_attn.q_norm.weight");
        L.attn.k_norm = norm_weight(p + "self_attn.k_norm.weight");
      }
      load_moe_with_gated_shared_or_dense(L, l);
      layers_.push_back(L);
    }
    finish_loading();
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen3_next(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                       const ModelOptions& options) {
  return std::make_unique<Qwen3Next>(model, cache, pool, options);
}

}  // namespace tern
