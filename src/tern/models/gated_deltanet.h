#pragma once
// Gated DeltaNet linear attention (Qwen3-Next's linear_attention layers), a
// shared block beside attention_block and mla_attention. Per token, with nk
// key heads of dk, nv = r x nk value heads of dv:
//   [q|k|v|z] = in_proj_qkvz x   (per key head: q dk, k dk, v r dv, z r dv)
//   [b|a]     = in_proj_ba x     (per key head: b r, a r)
//   c = silu(causal depthwise conv1d over time of q|k|v, kernel taps)
//   q, k: L2-normalised per head (eps 1e-6), q x dk^-1/2; value head h uses
//   key head h / r; beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias)
//   per value head, the state S [dk, dv]:
//     S *= exp(g);  S += k (beta (v - S^T k))^T;  o = S^T q
//   o = rmsnorm(o) w silu(z) per value head;  out = out_proj o
// The state (the last kernel - 1 conv inputs and every S) lives in the
// sequence's KVCache as a state layer and starts at zero at position 0. Each
// token's update is the recurrence above in a fixed order, whatever the
// batch: prefill chunk size, batching and thread count change no bit (see
// docs/DESIGN.md for why prefill does not use the chunked form).
#include <cstdint>
#include <span>

#include "tern/kernels/weight_view.h"
#include "tern/models/attention_block.h"
#include "tern/models/scratch.h"

namespace tern {

class ThreadPool;

struct DeltaNetWeights {
  WeightView qkvz, ba, out;
  const float* conv = nullptr;     // [conv_dim, kernel] taps (conv_dim = 2 nk dk + nv dv)
  const float* dt_bias = nullptr;  // [nv]
  const float* a_log = nullptr;    // [nv]
  const float* norm = nullptr;     // [dv], the gated RMSNorm's weight
  bool present() const { return qkvz.data != nullptr; }
};

struct DeltaNetShape {
  int64_t hidden = 0;
  int64_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0;  // per head
  int64_t kernel = 0;
  float norm_eps = 1e-6f;
  int64_t conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
  // Floats of the state KVCache::state(layer) holds.
  int64_t state_floats() const {
    return (kernel - 1) * conv_channels() + value_heads * key_dim * value_dim;
  }
};

// x: [n, hidden] normalised inputs, token t of the batch at slots[t] (tokens
// of one sequence in order); updates each sequence's state at `layer` and
// writes out: [n, hidden].
void gated_deltanet_forward(const DeltaNetWeights& w, const DeltaNetShape& s, const float* x,
                            std::span<const TokenSlot> slots, int64_t layer, float* out,
                            Scratch& scratch, ThreadPool* pool);

}  // namespace tern
