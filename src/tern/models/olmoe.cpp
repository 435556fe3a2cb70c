// OLMoE forward pass (model_type "olmoe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   q and k RMSNorm over the whole projection,
//                                then q/k/v clamped to clip_qkv (if set), RoPE, GQA
//   x += moe(rmsnorm(x))         softmax over all router logits, top-k,
//                                renormalised only if norm_topk_prob; SwiGLU experts
// then logits = lm_head(rmsnorm(x)).
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Olmoe final : public DecoderModel {
 public:
  Olmoe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    use_plain_rope();
    shape_.clip_qkv = static_cast<float>(cfg_.clip_qkv);
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L = layer_with_norms(l);
      load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias, cfg_.attention_bias);
      L.attn.q_norm_whole = w_.vector(p + "self_attn.q_norm.weight");
      L.attn.k_norm_whole = w_.vector(p + "self_attn.k_norm.weight");
      load_routed_experts(L, l, p + "mlp.gate.weight", cfg_.norm_topk_prob);
      layers_.push_back(L);
    }
    finish_loading();
  }
};

}  // namespace

std::unique_ptr<Model> make_olmoe(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                  const ModelOptions& options) {
  return std::make_unique<Olmoe>(model, cache, pool, options);
}

}  // namespace tern
