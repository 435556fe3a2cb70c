// GPT-OSS forward pass (model_type "gpt_oss": gpt-oss-20b, gpt-oss-120b) on
// the shared decoder (decoder_model.h; facts and sources: docs/gpt_oss_facts.md).
// Per layer:
//   x += attention(rmsnorm(x))   q/k/v/o biases, YaRN RoPE, GQA, a learned
//                                sink logit per head in every softmax row, a
//                                sliding window on the layers layer_types names
//   x += moe(rmsnorm(x))         router with bias: top-k logits, softmax over
//                                those k; experts with biases and the clamped
//                                SwiGLU (up + 1) * g * sigmoid(1.702 g)
// then logits = lm_head(rmsnorm(x)); lm_head is not tied.
// YaRN multiplies cos and sin by its attention factor, so every q.k by its
// square: folded into the softmax scale here.
#include "tern/core/error.h"
#include "tern/kernels/rope.h"
#include "tern/models/decoder_model.h"

namespace tern {

namespace {

RopeScaling rope_scaling_of(const ModelConfig& c) {
  RopeScaling r;
  if (!c.rope_scaling || c.rope_scaling->type == "default") return r;
  const RopeScalingConfig& s = *c.rope_scaling;
  if (s.type != "yarn") fail("rope_scaling type '{}' is not implemented for gpt_oss", s.type);
  r.kind = RopeScaling::Kind::Yarn;
  r.factor = s.factor;
  r.original_max_positions = s.original_max_position_embeddings;
  r.beta_fast = s.beta_fast;
  r.beta_slow = s.beta_slow;
  r.truncate = s.truncate;
  return r;
}

class GptOss final : public DecoderModel {
 public:
  GptOss(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : DecoderModel(tm, cache, pool, opt) {
    const auto& c = cfg_;
    const RopeScaling rope = rope_scaling_of(c);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta, rope);
    const double factor = rope_attention_factor(rope);
    shape_ = default_attention_shape(factor * factor);
    ffn_ = {static_cast<float>(c.swiglu_limit), static_cast<float>(c.swiglu_alpha)};
    for (int64_t l = 0; l < c.num_layers; ++l) layers_.push_back(load_layer(l));
    finish_loading();
  }

 private:
  DecoderLayer load_layer(int64_t l) const {
    const std::string p = layer_prefix(l);
    DecoderLayer L = layer_with_norms(l);
    load_attention_projections(L.attn, p + "self_attn.", true, true);
    L.attn.sinks = w_.vector(p + "self_attn.sinks");
    L.window = cfg_.layer_is_sliding(l) ? cfg_.sliding_window : 0;
    L.moe.router = w_.matrix(p + "mlp.router.weight");
    L.moe.routing = {cfg_.num_experts, cfg_.num_experts_per_tok, false, RouterScoring::TopKThenSoftmax,
                     w_.vector(p + "mlp.router.bias")};
    L.moe.experts = experts_of(l);
    L.moe.input_norm = L.post_norm;
    return L;
  }
};

}  // namespace

std::unique_ptr<Model> make_gpt_oss(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                    const ModelOptions& options) {
  return std::make_unique<GptOss>(model, cache, pool, options);
}

}  // namespace tern
