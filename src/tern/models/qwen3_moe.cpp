// Qwen3-MoE forward pass (model_type "qwen3_moe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))            q/k RMSNorm per head, RoPE, GQA
//   x += moe(rmsnorm(x)) or mlp(rmsnorm(x))   softmax router, top-k, SwiGLU experts
// then logits = lm_head(rmsnorm(x)) (lm_head tied to embed_tokens if configured).
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Qwen3Moe final : public DecoderModel {
 public:
  Qwen3Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    use_plain_rope();
    for (int64_t l = 0; l < cfg_.num_layers; ++l) layers_.push_back(load_layer(l));
    finish_loading();
  }

 private:
  DecoderLayer load_layer(int64_t l) const {
    const std::string p = layer_prefix(l);
    DecoderLayer L = layer_with_norms(l);
    load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias, cfg_.attention_bias);
    L.attn.q_norm = w_.vector(p + "self_attn.q_norm.weight");
    L.attn.k_norm = w_.vector(p + "self_attn.k_norm.weight");
    if (cfg_.layer_is_moe(l)) {
      load_routed_experts(L, l, p + "mlp.gate.weight", cfg_.norm_topk_prob);
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
