// Mixtral forward pass (model_type "mixtral") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   GQA, RoPE, no biases; every layer through
//                                the sliding window when the config sets one
//   x += moe(rmsnorm(x))         softmax over all router logits, top-k,
//                                renormalised; SwiGLU experts (w1 gate, w3 up, w2 down)
// then logits = lm_head(rmsnorm(x)).
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Mixtral final : public DecoderModel {
 public:
  Mixtral(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const auto& c = cfg_;
    if (c.rope_scaling) fail("rope_scaling type '{}' is not implemented for mixtral", c.rope_scaling->type);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = default_attention_shape();
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L;
      L.input_norm = w_.vector(p + "input_layernorm.weight");
      L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
      load_attention_projections(L.attn, p + "self_attn.", false, false);
      L.window = c.layer_is_sliding(l) ? c.sliding_window : 0;
      L.moe.router = w_.matrix(p + "block_sparse_moe.gate.weight");
      L.moe.routing = {c.num_experts, c.num_experts_per_tok, true, RouterScoring::SoftmaxThenTopK};
      L.moe.experts = experts_of(l);
      L.moe.input_norm = L.post_norm;
      layers_.push_back(L);
    }
    finish_loading();
  }
};

}  // namespace

std::unique_ptr<Model> make_mixtral(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                    const ModelOptions& options) {
  return std::make_unique<Mixtral>(model, cache, pool, options);
}

}  // namespace tern
