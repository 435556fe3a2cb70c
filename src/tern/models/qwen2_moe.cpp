// Qwen2-MoE forward pass (model_type "qwen2_moe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   q/k/v biases, RoPE, GQA
//   x += moe(rmsnorm(x))         softmax router, top-k (renormalised only if
//                                norm_topk_prob), SwiGLU experts, plus the
//                                shared expert gated by sigmoid(gate . x),
//                                computed while the routed reads are in flight
//     or mlp(rmsnorm(x))         on dense layers
// then logits = lm_head(rmsnorm(x)).
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Qwen2Moe final : public DecoderModel {
 public:
  Qwen2Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const auto& c = cfg_;
    if (c.rope_scaling) fail("rope_scaling type '{}' is not implemented for qwen2_moe", c.rope_scaling->type);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = default_attention_shape();
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L;
      L.input_norm = w_.vector(p + "input_layernorm.weight");
      L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
      load_attention_projections(L.attn, p + "self_attn.", c.attention_bias, false);
      if (c.layer_is_moe(l)) {
        L.moe.router = w_.matrix(p + "mlp.gate.weight");
        L.moe.routing = {c.num_experts, c.num_experts_per_tok, c.norm_topk_prob, RouterScoring::SoftmaxThenTopK};
        L.moe.experts = experts_of(l);
        L.moe.input_norm = L.post_norm;
        L.moe.shared.gate = w_.matrix(p + "mlp.shared_expert.gate_proj.weight");
        L.moe.shared.up = w_.matrix(p + "mlp.shared_expert.up_proj.weight");
        L.moe.shared.down = w_.matrix(p + "mlp.shared_expert.down_proj.weight");
        L.moe.shared.gate_logit = w_.matrix(p + "mlp.shared_expert_gate.weight");
      } else {
        load_dense_mlp(L, p + "mlp.");
      }
      layers_.push_back(L);
    }
    finish_loading();
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen2_moe(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                      const ModelOptions& options) {
  return std::make_unique<Qwen2Moe>(model, cache, pool, options);
}

}  // namespace tern
