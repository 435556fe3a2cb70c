// Qwen2-MoE forward pass (model_type "qwen2_moe") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   q/k/v biases, RoPE, GQA
//   x += moe(rmsnorm(x))         softmax router, top-k (renormalised only if
//                                norm_topk_prob), SwiGLU experts, plus the
//                                shared expert gated by sigmoid(gate . x),
//                                computed while the routed reads are in flight
//     or mlp(rmsnorm(x))         on dense layers
// then logits = lm_head(rmsnorm(x)).
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Qwen2Moe final : public DecoderModel {
 public:
  Qwen2Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    use_plain_rope();
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L = layer_with_norms(l);
      load_attention_projections(L.attn, p + "self_attn.", cfg_.attention_bias, false);
      load_moe_with_gated_shared_or_dense(L, l);
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
