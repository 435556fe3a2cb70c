// Qwen3-MoE forward pass (model_type "qwen3_moe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))            q/k RMSNorm per head, RoPE, GQA
//   x += moe(rmsnorm(x)) or mlp(rmsnorm(x))   softmax router, top-k, SwiGLU experts
// then logits = lm_head(rmsnorm(x)) (lm_head tied to embed_tokens if configured).
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Qwen3Moe final : public DecoderModel {
 public:
  Qwen3Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const auto& c = cfg_;
    if (c.rope_scaling && c.rope_scaling->type != "default")
      fail("rope_scaling type '{}' is not implemented yet for qwen3_moe", c.rope_scaling->type);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = default_attention_shape();
    for (int64_t l = 0; l < c.num_layers; ++l) layers_.push_back(load_layer(l));
    finish_loading();
  }

 private:
  DecoderLayer load_layer(int64_t l) const {
    const std::string p = layer_prefix(l);
    DecoderLayer L;
    L.input_norm = w_.vector(p + "input_layernorm.weight");
    L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
    load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias, cfg_.attention_bias);
    L.attn.q_norm = w_.vector(p + "self_attn.q_norm.weight");
    L.attn.k_norm = w_.vector(p + "self_attn.k_norm.weight");
    if (cfg_.layer_is_moe(l)) {
      L.moe.router = w_.matrix(p + "mlp.gate.weight");
      L.moe.routing = {cfg_.num_experts, cfg_.num_experts_per_tok, cfg_.norm_topk_prob};
      L.moe.experts = experts_of(l);
      L.moe.input_norm = L.post_norm;
    } else {
      load_dense_mlp(L, p + "mlp.");
    }
    return L;
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen3_moe(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                      const ModelOptions& options) {
  return std::make_unique<Qwen3Moe>(model, cache, pool, options);
}

}  // namespace tern
