#pragma once
// Routed mixture-of-experts block: router logits → softmax over all experts
// (F32) → top-k (ties: lower expert id) → optional renormalisation → SwiGLU
// experts fetched through the ExpertCache → weighted sum. Plus the dense
// SwiGLU MLP used by non-MoE layers.
//
// Determinism: each token's output is accumulated expert by expert in
// ascending expert id, whatever the batch, cache state or thread count, so
// placement never changes results.
#include <cstdint>
#include <vector>

#include "tern/experts/expert_cache.h"
#include "tern/kernels/weight_view.h"
#include "tern/models/scratch.h"

namespace tern {

class ThreadPool;

// How router logits become the chosen experts and their weights.
enum class RouterScoring {
  SoftmaxThenTopK,  // softmax over all experts, top-k, optionally renormalised (Qwen3)
  TopKThenSoftmax,  // top-k of the logits, softmax over those k (gpt_oss, Mixtral)
};

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;  // SoftmaxThenTopK: divide the k weights by their sum
  RouterScoring scoring = RouterScoring::SoftmaxThenTopK;
  const float* bias = nullptr;  // [num_experts] added to the logits (gpt_oss), or null
};

// The routed experts' FFN: SwiGLU down(silu(gate x) * up x), or with
// swiglu_limit > 0 gpt_oss's clamped form down((clamp(up) + 1) * g * sigmoid(alpha g))
// with g = min(gate x, limit). An expert record's optional F32 sections
// gate_bias, up_bias, down_bias are added after their projections (the
// down bias before the routing weight).
struct ExpertFfn {
  float swiglu_limit = 0;
  float swiglu_alpha = 1.702f;
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
};

// x: [n, hidden] normalised inputs; out: [n, hidden].
void moe_forward(const WeightView& router, const RouterConfig& cfg, const ExpertLayer& layer,
                 ExpertCache& cache, const float* x, int64_t n, int64_t hidden, float* out,
                 Scratch& scratch, ThreadPool* pool, MoeCounters* counters, Routing* routing_out,
                 const ExpertFfn& ffn = {});

// Dense SwiGLU MLP: out = down(silu(gate(x)) * up(x)).
void swiglu_mlp(const WeightView& gate, const WeightView& up, const WeightView& down, const float* x,
                int64_t n, float* out, Scratch& scratch, ThreadPool* pool);

}  // namespace tern
