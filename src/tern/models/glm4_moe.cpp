// GLM-4.5 forward pass (model_type "glm4_moe") on the shared decoder
// (decoder_model.h; the config and tensors: format/arch_glm4_moe.cpp).
// Per layer:
//   x += attention(rmsnorm(x))   q/k/v biases, optional per-head q/k RMSNorm,
//                                RoPE on the leading rotary_dim dims of each
//                                head, GQA
//   x += moe(rmsnorm(x))         DeepSeek-V3's grouped sigmoid router and
//                                ungated shared experts
//     or mlp(rmsnorm(x))         the first first_k_dense_replace layers
// then logits = lm_head(rmsnorm(x)).
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Glm4Moe final : public DecoderModel {
 public:
  Glm4Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    inv_freq_ = rope_inv_freq(cfg_.rotary_dim, cfg_.rope_theta);
    shape_ = default_attention_shape();
    shape_.rotary_dim = cfg_.rotary_dim;
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L = layer_with_norms(l);
      load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias, false);
      if (cfg_.qk_norm) {
        L.attn.q_norm = w_.vector(p + "self_attn.q_norm.weight");
        L.attn.k_norm = w_.vector(p + "self_attn.k_norm.weight");
      }
      load_grouped_moe_or_dense(L, l);
      layers_.push_back(L);
    }
    finish_loading();
  }
};

}  // namespace

std::unique_ptr<Model> make_glm4_moe(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                     const ModelOptions& options) {
  return std::make_unique<Glm4Moe>(model, cache, pool, options);
}

}  // namespace tern
