// GPT-OSS forward pass (model_type "gpt_oss": gpt-oss-20b, gpt-oss-120b),
// composed from the shared blocks (facts and sources: docs/gpt_oss_facts.md).
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
#include <cmath>

#include "tern/core/error.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"
#include "tern/models/attention_block.h"
#include "tern/models/decoder.h"
#include "tern/models/model.h"
#include "tern/models/trunk_weights.h"

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

class GptOss final : public Model {
 public:
  GptOss(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : cfg_(tm.config()), tm_(tm), cache_(cache), pool_(pool), opt_(opt), w_(tm, opt.verify_trunk) {
    const auto& c = cfg_;
    const RopeScaling rope = rope_scaling_of(c);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta, rope);
    const double factor = rope_attention_factor(rope);
    shape_ = {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, static_cast<float>(c.rms_norm_eps),
              static_cast<float>(factor * factor / std::sqrt(static_cast<double>(c.head_dim))), inv_freq_.data(), 0};
    ffn_ = {static_cast<float>(c.swiglu_limit), static_cast<float>(c.swiglu_alpha)};
    embed_ = w_.matrix("model.embed_tokens.weight");
    lm_head_ = c.tie_word_embeddings ? embed_ : w_.matrix("lm_head.weight");
    final_norm_ = w_.vector("model.norm.weight");
    for (int64_t l = 0; l < c.num_layers; ++l) layers_.push_back(load_layer(l));
    for (const Layer& L : layers_) moe_.push_back(L.moe);
  }

  const ModelConfig& config() const override { return cfg_; }
  uint64_t resident_bytes() const override { return w_.resident_bytes(); }

  void forward_batch(std::span<const SequenceBatch> sequences, ForwardTrace* trace) override {
    layout_batch(sequences, rows_);
    const auto n = static_cast<int64_t>(rows_.tokens.size());
    const int64_t H = cfg_.hidden_size;
    float* x = scratch_.get(0, n * H);
    float* xn = scratch_.get(1, n * H);
    float* y = scratch_.get(2, n * H);
    embed_tokens(embed_, rows_.tokens, cfg_.vocab_size, H, x);
    start_trace(trace, cfg_.num_layers);
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const Layer& L = layers_[static_cast<size_t>(l)];
      AttentionShape shape = shape_;
      shape.window = cfg_.layer_is_sliding(l) ? cfg_.sliding_window : 0;
      for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.input_norm, H, shape_.norm_eps, xn + t * H);
      attention_forward(L.attn, shape, xn, rows_.slots, l, y, attn_scratch_, pool_);
      add(x, y, x, n * H);
      for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.post_norm, H, shape_.norm_eps, xn + t * H);
      const Lookahead ahead = lookahead_after(moe_, l, opt_.prefetch_depth, x, shape_.norm_eps, opt_.prefetch_margin,
                                                &predictions_);
      moe_forward(L.moe, cache_, xn, n, H, y, mlp_scratch_, pool_, &counters_,
                  trace ? &trace->routing[static_cast<size_t>(l)] : nullptr, ffn_, &ahead);
      add(x, y, x, n * H);
      if (opt_.prefetch_depth > 0)
        lookahead_refresh(lookahead_after(moe_, l, 1, x, shape_.norm_eps, opt_.prefetch_margin, &predictions_),
                          cache_, n, H, mlp_scratch_, pool_);
      trace_hidden(trace, l, x, n * H);
    }
    const auto m = static_cast<int64_t>(rows_.logit_rows.size());
    final_logits(lm_head_, final_norm_, shape_.norm_eps, x, H, sequences, rows_, xn,
                 sequences.size() > 1 ? scratch_.get(3, m * cfg_.vocab_size) : nullptr, pool_);
  }

 private:
  struct Layer {
    const float* input_norm = nullptr;
    const float* post_norm = nullptr;
    AttentionWeights attn;
    MoeLayerRef moe;
  };

  Layer load_layer(int64_t l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    Layer L;
    L.input_norm = w_.vector(p + "input_layernorm.weight");
    L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
    for (auto [view, bias, name] : {std::tuple{&L.attn.q, &L.attn.q_bias, "q_proj"},
                                    std::tuple{&L.attn.k, &L.attn.k_bias, "k_proj"},
                                    std::tuple{&L.attn.v, &L.attn.v_bias, "v_proj"},
                                    std::tuple{&L.attn.o, &L.attn.o_bias, "o_proj"}}) {
      *view = w_.matrix(p + "self_attn." + name + ".weight");
      *bias = w_.vector(p + "self_attn." + name + ".bias");
    }
    L.attn.sinks = w_.vector(p + "self_attn.sinks");
    L.moe.router = w_.matrix(p + "mlp.router.weight");
    L.moe.routing = {cfg_.num_experts, cfg_.num_experts_per_tok, false, RouterScoring::TopKThenSoftmax,
                     w_.vector(p + "mlp.router.bias")};
    L.moe.experts = tm_.manifest().find_expert_layer(l);
    L.moe.input_norm = L.post_norm;
    if (!L.moe.experts) fail("layer {} has no experts in the container", l);
    return L;
  }

  const ModelConfig& cfg_;
  const TernModel& tm_;
  ExpertCache& cache_;
  ThreadPool* pool_;
  ModelOptions opt_;
  TrunkWeights w_;
  std::vector<float> inv_freq_;
  AttentionShape shape_;
  ExpertFfn ffn_;
  WeightView embed_, lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<MoeLayerRef> moe_;
  Predictions predictions_;  // per layer (experts null for dense layers)
  Scratch scratch_, attn_scratch_, mlp_scratch_;
  BatchRows rows_;
};

}  // namespace

std::unique_ptr<Model> make_gpt_oss(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                    const ModelOptions& options) {
  return std::make_unique<GptOss>(model, cache, pool, options);
}

}  // namespace tern
