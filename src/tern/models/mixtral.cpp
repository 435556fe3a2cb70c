// Mixtral forward pass (model_type "mixtral") on the shared decoder
// (decoder_model.h). Per layer:
//   x += attention(rmsnorm(x))   GQA, RoPE, no biases; every layer through
//                                the sliding window when the config sets one
//   x += moe(rmsnorm(x))         softmax over all router logits, top-k,
//                                renormalised; SwiGLU experts (w1 gate, w3 up, w2 down)
// then logits = lm_head(rmsnorm(x)).
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

class Mixtral final : public DecoderModel {
 public:
  Mixtral(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    use_plain_rope();
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      DecoderLayer L = layer_with_norms(l);
      load_attention_projections(L.attn, p + "self_attn.", false, false);
      L.window = cfg_.layer_is_sliding(l) ? cfg_.sliding_window : 0;
      load_routed_experts(L, l, p + "block_sparse_moe.gate.weight", true);
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
