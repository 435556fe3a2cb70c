#pragma once
// Routed mixture-of-experts block: router logits → softmax over all experts
// (F32) → top-k (ties: lower expert id) → optional renormalisation → SwiGLU
// experts fetched through the ExpertCache → weighted sum. Plus the dense
// SwiGLU MLP used by non-MoE layers.
//
// Determinism: each token's output is accumulated expert by expert in
// ascending expert id, whatever the batch, cache state or thread count, so
// placement never changes results.
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "tern/experts/expert_cache.h"
#include "tern/experts/routing_trace.h"
#include "tern/kernels/weight_view.h"
#include "tern/models/scratch.h"

namespace tern {

class ThreadPool;

// How router logits become the chosen experts and their weights.
enum class RouterScoring {
  SoftmaxThenTopK,  // softmax over all experts, top-k, optionally renormalised (Qwen3)
  TopKThenSoftmax,  // top-k of the logits, softmax over those k (gpt_oss, Mixtral)
  // DeepSeek-V3's noaux_tc: scores s = sigmoid(logits); experts are chosen by
  // s + selection_bias, only among the topk_group of n_group equal groups
  // with the best group score (the sum of a group's two best), the others'
  // choice scores set to 0 as transformers masks them; the weights are the
  // chosen experts' s, divided by their sum (+1e-20) when norm_topk_prob,
  // times scaling.
  SigmoidGrouped,
};

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;  // SoftmaxThenTopK: divide the k weights by their sum
  RouterScoring scoring = RouterScoring::SoftmaxThenTopK;
  const float* bias = nullptr;  // [num_experts] added to the logits (gpt_oss), or null
  // SigmoidGrouped only:
  const float* selection_bias = nullptr;  // [num_experts] e_score_correction_bias, or null
  int64_t n_group = 1, topk_group = 1;
  float scaling = 1.0f;  // routed_scaling_factor
  // [num_experts], or null: each chosen expert's final weight is multiplied
  // by its entry (Gemma 4's router.per_expert_scale, after renormalising).
  const float* expert_scale = nullptr;
};

// The routed experts' FFN: SwiGLU down(silu(gate x) * up x), or with
// swiglu_limit > 0 gpt_oss's clamped form down((clamp(up) + 1) * g * sigmoid(alpha g))
// with g = min(gate x, limit). An expert record's optional F32 sections
// gate_bias, up_bias, down_bias are added after their projections (the
// down bias before the routing weight).
// The gate's activation of a gated feed-forward: silu (SwiGLU) or gelu
// with the tanh approximation (GeGLU, Gemma).
enum class GateActivation { Silu, GeluTanh };

struct ExpertFfn {
  float swiglu_limit = 0;
  float swiglu_alpha = 1.702f;
  GateActivation activation = GateActivation::Silu;  // when swiglu_limit is 0
};

// The experts a batch of tokens chose in one layer: [n_tokens * top_k].
struct Routing {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Pure function: router logits [n, E] (bias already added) → top-k experts
// and weights per token. Ties go to the lower expert id.
Routing route_tokens(const float* router_logits, int64_t n, const RouterConfig& cfg, float* probs_scratch);

// Per-layer accounting, accumulated by moe_forward.
struct MoeCounters {
  uint64_t experts_needed = 0;  // token-expert pairs
  uint64_t experts_loaded = 0;  // distinct experts acquired
  // The lookahead's accuracy: token-expert pairs of layers an earlier layer
  // predicted, and how many of them were among the predicted experts.
  uint64_t predicted_needed = 0, predicted_hits = 0;
  // Wall time in the output head (final norm, lm_head), the part of a step
  // no expert read can overlap: the next token's experts are not known yet.
  double head_seconds = 0;
};

// What the lookahead predicted per layer (index: layer): each token's
// predicted experts, `width` per token. Owned by the model.
//
// Where the lookahead has a stand-in (Lookahead::standin) it makes two
// predictions of the nearest layer, from the residual as it is and with the
// stand-in added, prefetches the one whose recent record on that layer is
// better (the plain one on a tie) and keeps the other as its rival; when the
// layer runs both are scored. `score` holds each predictor's hits per layer,
// decayed so that the choice follows the text.
struct Predictions {
  std::vector<std::vector<int32_t>> experts;
  std::vector<int64_t> width;
  std::vector<std::vector<int32_t>> rival;  // same shape as experts; empty: no rival
  std::vector<std::array<double, 2>> score;  // [plain, stand-in]
  std::vector<char> chose_standin;
  bool always_standin = false;  // a diagnostic (TERN_LOOKAHEAD_STANDIN=1): no choice
  bool prefer_standin(size_t layer) const {
    return always_standin || (layer < score.size() && score[layer][1] > score[layer][0]);
  }
  void resize(size_t layers);
};

// A resident expert every token goes through beside the routed ones:
// out += sigmoid(gate . x) * down(silu(gate_proj x) * up_proj x) (Qwen2-MoE),
// or ungated (DeepSeek-V3's shared experts, one MLP of their summed width).
struct SharedExpert {
  WeightView gate, up, down;
  WeightView gate_logit;  // [1, hidden]: the per-token sigmoid gate's weights; null: ungated
  bool present() const { return gate.data != nullptr; }
};

// One MoE layer as the block runs it: its router and routing rule, its
// experts in the container, the RMSNorm weight its MoE input is normalised
// with (the lookahead applies it to an earlier layer's residual to predict
// this layer's experts), and its shared expert if it has one.
struct MoeLayerRef {
  WeightView router;
  RouterConfig routing;
  const ExpertLayer* experts = nullptr;
  const float* input_norm = nullptr;
  SharedExpert shared;
};

// Lookahead prefetch while a layer runs: each following layer's router is
// applied to this layer's residual stream (normalised with that layer's own
// norm) and every token's top-(k + margin) experts there are read ahead, so
// their reads overlap this layer's compute. Predictions only warm the cache;
// they never change results.
// A diagnostic, not a feature (TERN_PREFETCH_ORACLE=TRACE, docs/DESIGN.md):
// the routing a previous run of the same request recorded (`generate
// --trace`), so the lookahead prefetches what each layer will truly need
// instead of the router's guess. It measures the streamer with a perfect
// predictor. Like every prediction it only warms the cache: no result changes.
struct PrefetchOracle {
  RoutingTrace trace;
  std::vector<int64_t> moe_index;  // decoder layer -> its MoE ordinal in the trace (-1: dense)
  // The experts position `pos` used at decoder layer `layer`; empty when the
  // trace does not reach that far.
  std::span<const int32_t> experts(int64_t pos, int64_t layer) const;
};

struct Lookahead {
  std::vector<const MoeLayerRef*> next;  // nearest first; empty: off
  const float* residual = nullptr;       // [n, hidden], before this layer's MoE norm
  // [hidden] or null: for a one-row batch, the previous token's attention
  // output of the layers up to the nearest next one. That layer's router sees
  // the residual plus its attention's output, which is not computed yet; the
  // previous token's is a guess at it (consecutive tokens attend over nearly
  // the same context). Predictions keeps whichever of the two predictions
  // has been right more often on that layer.
  const float* standin = nullptr;
  float norm_eps = 1e-6f;
  int64_t margin = 0;
  Predictions* predictions = nullptr;  // records predictions, scores them when the layer runs
  // With an oracle, the rows' positions ([n]; one sequence) pick its routing.
  const PrefetchOracle* oracle = nullptr;
  const int64_t* positions = nullptr;
};

// The `depth` MoE layers after layer `l` of `layers` (one entry per layer,
// experts == null for dense layers), as a Lookahead over `residual`.
Lookahead lookahead_after(const std::vector<MoeLayerRef>& layers, int64_t l, int depth, const float* residual,
                          float norm_eps, int64_t margin, Predictions* predictions = nullptr);

// After a layer's MoE: predicts the next MoE layer again from the residual
// that now includes this layer's output (only that layer's attention is left
// to differ), prefetches what the earlier prediction missed and protects it.
void lookahead_refresh(const Lookahead& la, ExpertCache& cache, int64_t n, int64_t hidden, Scratch& scratch,
                       ThreadPool* pool);

// Speculation across tokens with the oracle: while the output head runs,
// prefetches what the first `depth` MoE layers of `layers` use at `position`
// (the next token's).
void oracle_prefetch_token(const PrefetchOracle& oracle, const std::vector<MoeLayerRef>& layers, int depth,
                           int64_t position, ExpertCache& cache);

// x: [n, hidden] normalised inputs; out: [n, hidden].
// Streams: every expert the batch needs is requested at once (reads start for
// the missing ones), the resident ones are computed while the others are in
// flight, each missing one as it lands, then the outputs are combined per
// token in ascending expert id, so the result is the same bits whatever was
// cached, prefetched or read, and in whatever order the reads landed. A
// shared expert is computed while the routed experts' reads are in flight
// and added after them.
//
// Optional side work (Gemma 4): the router reads router_x [n, hidden]
// instead of x (its own normalisation of the same residual), and
// while_reading runs once after the reads are requested and before the
// routed experts are computed (a dense branch beside the experts, on compute
// that would otherwise wait for the disk).
struct MoeSideWork {
  const float* router_x = nullptr;
  std::function<void()> while_reading;
};
void moe_forward(const MoeLayerRef& layer, ExpertCache& cache, const float* x, int64_t n, int64_t hidden, float* out,
                 Scratch& scratch, ThreadPool* pool, MoeCounters* counters, Routing* routing_out,
                 const ExpertFfn& ffn = {}, const Lookahead* lookahead = nullptr, const MoeSideWork* side = nullptr);

// Dense gated MLP: out = down(act(gate(x)) * up(x)), SwiGLU by default.
void swiglu_mlp(const WeightView& gate, const WeightView& up, const WeightView& down, const float* x,
                int64_t n, float* out, Scratch& scratch, ThreadPool* pool,
                GateActivation activation = GateActivation::Silu);

}  // namespace tern
