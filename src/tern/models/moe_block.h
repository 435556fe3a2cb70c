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

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
};

// The experts a batch of tokens chose in one layer: [n_tokens * top_k].
struct Routing {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Pure function: router logits [n, E] → top-k experts and weights per token.
Routing route_tokens(const float* router_logits, int64_t n, const RouterConfig& cfg, float* probs_scratch);

// Per-layer accounting, accumulated by moe_forward.
struct MoeCounters {
  uint64_t experts_needed = 0;  // token-expert pairs
  uint64_t experts_loaded = 0;  // distinct experts acquired
};

// x: [n, hidden] normalised inputs; out: [n, hidden].
void moe_forward(const WeightView& router, const RouterConfig& cfg, const ExpertLayer& layer,
                 ExpertCache& cache, const float* x, int64_t n, int64_t hidden, float* out,
                 Scratch& scratch, ThreadPool* pool, MoeCounters* counters, Routing* routing_out);

// Dense SwiGLU MLP: out = down(silu(gate(x)) * up(x)).
void swiglu_mlp(const WeightView& gate, const WeightView& up, const WeightView& down, const float* x,
                int64_t n, float* out, Scratch& scratch, ThreadPool* pool);

}  // namespace tern
