// OLMoE forward pass (model_type "olmoe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   q and k RMSNorm over the whole projection,
//                                then q/k/v clamped to clip_qkv (if set), RoPE, GQA
//   x += moe(rmsnorm(x))         softmax over all router logits, top-k,
//                                renormalised only if norm_topk_prob; SwiGLU experts
// then logits = lm_head(rmsnorm(x)).
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Olmoe final : public DecoderModel {
 public:
  Olmoe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const auto& c = cfg_;
    if (c.rope_scaling) fail("rope_scaling type '{}' is not implemented for olmoe", c.rope_scaling->type);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = default_attention_shape();
    shape_.clip_qkv = static_cast<float>(c.clip_qkv);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L;
      L.input_norm = w_.vector(p + "input_layernorm.weight");
      L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
      load_attention_projections(L.attn, p + "self_attn.", c.attention_bias, c.attention_bias);
      L.attn.q_norm_whole = w_.vector(p + "self_attn.q_norm.weight");
      L.attn.k_norm_whole = w_.vector(p + "self_attn.k_norm.weight");
      L.moe.router = w_.matrix(p + "mlp.gate.weight");
      L.moe.routing = {c.num_experts, c.num_experts_per_tok, c.norm_topk_prob, RouterScoring::SoftmaxThenTopK};
      L.moe.experts = experts_of(l);
      L.moe.input_norm = L.post_norm;
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
