// Qwen3-MoE forward pass (model_type "qwen3_moe"), composed from the shared
// blocks. Per layer:
//   x += attention(rmsnorm(x))            q/k RMSNorm per head, RoPE, GQA
//   x += moe(rmsnorm(x)) or mlp(rmsnorm(x))   softmax router, top-k, SwiGLU experts
// then logits = lm_head(rmsnorm(x)) (lm_head tied to embed_tokens if configured).
#include <cmath>

#include "tern/core/error.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"
#include "tern/models/attention_block.h"
#include "tern/models/decoder.h"
#include "tern/models/model.h"
#include "tern/models/trunk_weights.h"

namespace tern {

namespace {

class Qwen3Moe final : public Model {
 public:
  Qwen3Moe(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
      : cfg_(tm.config()), tm_(tm), cache_(cache), pool_(pool), opt_(opt), w_(tm, opt.verify_trunk) {
    const auto& c = cfg_;
    if (c.rope_scaling && c.rope_scaling->type != "default")
      fail("rope_scaling type '{}' is not implemented yet for qwen3_moe", c.rope_scaling->type);
    inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta);
    shape_ = {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, static_cast<float>(c.rms_norm_eps),
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))), inv_freq_.data()};
    router_ = {c.num_experts, c.num_experts_per_tok, c.norm_topk_prob};
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
      for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.input_norm, H, shape_.norm_eps, xn + t * H);
      attention_forward(L.attn, shape_, xn, rows_.slots, l, y, attn_scratch_, pool_);
      add(x, y, x, n * H);
      for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.post_norm, H, shape_.norm_eps, xn + t * H);
      if (L.moe.experts) {
        const Lookahead ahead = lookahead_after(moe_, l, opt_.prefetch_depth, x, shape_.norm_eps, opt_.prefetch_margin,
                                                &predictions_);
        moe_forward(L.moe, cache_, xn, n, H, y, mlp_scratch_, pool_, &counters_,
                    trace ? &trace->routing[static_cast<size_t>(l)] : nullptr, {}, &ahead);
      } else {
        swiglu_mlp(L.gate, L.up, L.down, xn, n, y, mlp_scratch_, pool_);
      }
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
    MoeLayerRef moe;  // experts null for dense layers
    WeightView gate, up, down;
  };

  Layer load_layer(int64_t l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    Layer L;
    L.input_norm = w_.vector(p + "input_layernorm.weight");
    L.post_norm = w_.vector(p + "post_attention_layernorm.weight");
    L.attn.q = w_.matrix(p + "self_attn.q_proj.weight");
    L.attn.k = w_.matrix(p + "self_attn.k_proj.weight");
    L.attn.v = w_.matrix(p + "self_attn.v_proj.weight");
    L.attn.o = w_.matrix(p + "self_attn.o_proj.weight");
    if (cfg_.attention_bias) {
      L.attn.q_bias = w_.vector(p + "self_attn.q_proj.bias");
      L.attn.k_bias = w_.vector(p + "self_attn.k_proj.bias");
      L.attn.v_bias = w_.vector(p + "self_attn.v_proj.bias");
      L.attn.o_bias = w_.vector(p + "self_attn.o_proj.bias");
    }
    L.attn.q_norm = w_.vector(p + "self_attn.q_norm.weight");
    L.attn.k_norm = w_.vector(p + "self_attn.k_norm.weight");
    if (cfg_.layer_is_moe(l)) {
      L.moe.router = w_.matrix(p + "mlp.gate.weight");
      L.moe.routing = router_;
      L.moe.experts = tm_.manifest().find_expert_layer(l);
      L.moe.input_norm = L.post_norm;
      if (!L.moe.experts) fail("layer {} is MoE but the container has no experts for it", l);
    } else {
      L.gate = w_.matrix(p + "mlp.gate_proj.weight");
      L.up = w_.matrix(p + "mlp.up_proj.weight");
      L.down = w_.matrix(p + "mlp.down_proj.weight");
    }
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
  RouterConfig router_;
  WeightView embed_, lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<MoeLayerRef> moe_;
  Predictions predictions_;  // per layer (experts null for dense layers)
  Scratch scratch_, attn_scratch_, mlp_scratch_;
  BatchRows rows_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3_moe(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                      const ModelOptions& options) {
  return std::make_unique<Qwen3Moe>(model, cache, pool, options);
}

}  // namespace tern
