#pragma once
// DecoderModel — the pre-norm decoder every supported architecture is:
//   x += attention(rmsnorm(x))                  per layer: its AttentionWeights
//                                               and sliding window (0: none),
//                                               or multi-head latent attention,
//                                               or Gated DeltaNet linear attention
//   x += moe(rmsnorm(x)) or mlp(rmsnorm(x))     routed experts (+ an optional
//                                               gated shared expert), or a dense
//                                               SwiGLU MLP
// then logits = lm_head(rmsnorm(x)). An architecture file loads its tensors
// into DecoderLayers and sets the shapes; the forward pass, the lookahead
// prefetch and the tracing are this class's, so every mechanism applies to
// every architecture unchanged.
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/models/attention_block.h"
#include "tern/models/decoder.h"
#include "tern/models/gated_deltanet.h"
#include "tern/models/mla_attention.h"
#include "tern/models/model.h"
#include "tern/models/moe_block.h"
#include "tern/models/trunk_weights.h"

namespace tern {

struct DecoderLayer {
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
  AttentionWeights attn;
  MlaWeights mla;            // present: the layer attends through MLA (mla_shape_), not attn
  DeltaNetWeights deltanet;  // present: the layer mixes through Gated DeltaNet (deltanet_shape_)
  int64_t window = 0;        // > 0: sliding-window attention over this many keys
  MoeLayerRef moe;           // experts null: a dense layer
  WeightView gate, up, down;  // the dense layer's SwiGLU MLP
  const AttentionShape* shape = nullptr;  // this layer's attention shape; null: the model's shape_
  // Gemma's sandwich layer (set: sandwich_out_norm):
  //   x += attn_out_norm(attention(input_norm(x)))
  //   x += sandwich_out_norm(dense_out_norm(mlp(post_norm(x))) +
  //                          moe_out_norm(experts(moe_in_norm(x))))   routed by moe.input_norm(x)
  //   x *= layer_scalar
  const float* attn_out_norm = nullptr;
  const float* sandwich_out_norm = nullptr;
  const float* dense_out_norm = nullptr;
  const float* moe_in_norm = nullptr;
  const float* moe_out_norm = nullptr;
  float layer_scalar = 1.0f;
};

class DecoderModel : public Model {
 public:
  const ModelConfig& config() const override { return cfg_; }
  uint64_t resident_bytes() const override { return w_.resident_bytes(); }
  void forward_batch(std::span<const SequenceBatch> sequences, ForwardTrace* trace) override;

 protected:
  DecoderModel(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt);

  // Called by the architecture's constructor once layers_, shape_ and ffn_
  // are set: loads embeddings, final norm and lm_head (tied when configured)
  // and indexes the MoE layers for the lookahead.
  void finish_loading();
  // Gemma's feed-forward of a sandwich layer (DecoderLayer), into y; x is the
  // residual after attention, xn its post_norm (the dense branch's input).
  void sandwich_ffn(const DecoderLayer& L, int64_t l, int64_t n, const float* x, const float* xn, float* y,
                    ForwardTrace* trace);
  // The attention shape of cfg_ with a softmax scale of 1/sqrt(head_dim) times
  // `scale_factor`, RoPE from inv_freq_ (set inv_freq_ first).
  AttentionShape default_attention_shape(double scale_factor = 1.0) const;
  // Layer l's experts in the container; throws if the container has none.
  const ExpertLayer* experts_of(int64_t layer) const;
  // RoPE without scaling (a rope_scaling other than "default" fails naming
  // the architecture) and the default attention shape.
  void use_plain_rope();
  // Layer l with its input_layernorm and post_attention_layernorm loaded.
  DecoderLayer layer_with_norms(int64_t layer) const;
  // An RMSNorm weight: the stored vector, or 1 + w when the config stores
  // norms zero-centred (Qwen3-Next; 1 + w rounded to float, as transformers
  // computes it in float32).
  const float* norm_weight(const std::string& name) const;
  // Layer l's routed experts behind the router `router` (a tensor name), with
  // the softmax-then-top-k rule (renormalised when `renormalise`); the MoE
  // input is normalised by the layer's post_norm.
  void load_routed_experts(DecoderLayer& layer, int64_t l, const std::string& router, bool renormalise) const;
  // Qwen2-MoE's feed-forward (qwen2_moe, qwen3_next): on an MoE layer the
  // softmax top-k experts behind "model.layers.{l}.mlp.gate" (renormalised
  // when norm_topk_prob) plus mlp.shared_expert gated by
  // sigmoid(mlp.shared_expert_gate . x); else the dense mlp.
  void load_moe_with_gated_shared_or_dense(DecoderLayer& layer, int64_t l) const;
  // DeepSeek-V3's family (deepseek_v3, glm4_moe): layer l's MoE under
  // "model.layers.{l}.mlp." (the grouped sigmoid router with its selection
  // bias, routed experts, ungated shared experts) or its dense MLP.
  void load_grouped_moe_or_dense(DecoderLayer& layer, int64_t l) const;
  // q/k/v/o_proj weights under `prefix` ("model.layers.3.self_attn."), with
  // q/k/v biases when qkv_bias and an o bias when o_bias.
  void load_attention_projections(AttentionWeights& attn, const std::string& prefix, bool qkv_bias, bool o_bias) const;
  // A dense layer's gate_proj/up_proj/down_proj under `prefix` ("model.layers.3.mlp.").
  void load_dense_mlp(DecoderLayer& layer, const std::string& prefix) const;
  // "model.layers.{l}."
  static std::string layer_prefix(int64_t layer);

  const ModelConfig& cfg_;
  const TernModel& tm_;
  ExpertCache& cache_;
  ThreadPool* pool_;
  ModelOptions opt_;
  TrunkWeights w_;
  std::vector<float> inv_freq_;
  AttentionShape shape_;
  MlaShape mla_shape_;  // the MLA layers' shape
  DeltaNetShape deltanet_shape_;  // the linear-attention layers' shape
  ExpertFfn ffn_;
  std::vector<DecoderLayer> layers_;

 private:
  WeightView embed_, lm_head_;
  mutable std::deque<std::vector<float>> shifted_norms_;  // norm_weight's 1 + w copies
  const float* final_norm_ = nullptr;
  std::vector<MoeLayerRef> moe_;
  Predictions predictions_;  // per layer (experts null for dense layers)
  std::unique_ptr<PrefetchOracle> oracle_;  // TERN_PREFETCH_ORACLE (moe_block.h); null: off
  std::vector<int64_t> positions_;          // the batch's rows' positions, for the oracle
  // The lookahead's stand-in (Lookahead::standin): each layer's attention
  // output for the last row of the latest one-sequence batch, at
  // (standin_kv_, standin_pos_); standin_ready_: this batch continues it.
  std::vector<float> standin_attn_, standin_sum_;
  const KVCache* standin_kv_ = nullptr;
  int64_t standin_pos_ = -1;
  bool standin_ready_ = false;
  // The lookahead from layer l's residual x, with the oracle when one runs.
  Lookahead lookahead(int64_t l, int depth, const float* x);
  Scratch scratch_, attn_scratch_, mlp_scratch_, dense_scratch_;
  BatchRows rows_;
};

}  // namespace tern
