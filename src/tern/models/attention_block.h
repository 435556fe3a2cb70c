#pragma once
// Self-attention block shared by the decoder architectures: q/k/v
// projections (+ optional biases), optional q/k RMSNorm per head (Qwen3) or
// over the whole projection (OLMoE), optional clamping of q/k/v (OLMoE's
// clip_qkv), RoPE (on the leading rotary_dim dims of each head when partial),
// grouped-query causal attention over the KV cache (with an
// optional sliding window and sink logits), an optional sigmoid output
// gate per head (Qwen3-Next), output projection.
#include <cstdint>
#include <span>
#include <vector>

#include "tern/kernels/weight_view.h"
#include "tern/models/kv_cache.h"
#include "tern/models/scratch.h"

namespace tern {

class ThreadPool;

struct AttentionWeights {
  WeightView q, k, v, o;
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* o_bias = nullptr;
  const float* q_norm = nullptr;  // [head_dim], per-head RMSNorm before RoPE
  const float* k_norm = nullptr;
  // RMSNorm over the whole projection, [n_heads * head_dim] / [n_kv_heads *
  // head_dim], after the biases and before clipping and RoPE (OLMoE).
  const float* q_norm_whole = nullptr;
  const float* k_norm_whole = nullptr;
  const float* sinks = nullptr;   // [n_heads] attention-sink logits (gpt_oss), or null
  // q_proj yields 2 x head_dim rows per head, [query, gate] (and q_bias as
  // many); each head's output is multiplied by sigmoid(gate) before o_proj
  // (Qwen3-Next's gated attention).
  bool output_gate = false;
  // No v_proj: the values are the raw key projection (before k_norm and
  // RoPE; Gemma 4's attention_k_eq_v full layers).
  bool values_are_keys = false;
  // Each value head RMS-normed without a weight (Gemma 4's v_norm).
  bool v_norm_unit = false;
};

struct AttentionShape {
  int64_t hidden = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  float norm_eps = 1e-6f;
  float scale = 0;                 // softmax scale, usually 1/sqrt(head_dim)
  const float* rope_inv_freq = nullptr;  // [rotary_dim / 2]
  // Leading dims of each head that RoPE rotates (rotate_half pairs within
  // them; the rest pass through: partial rotary, GLM-4.5); 0: all of head_dim.
  int64_t rotary_dim = 0;
  int64_t window = 0;              // > 0: query i sees keys j with i - j < window
  float clip_qkv = 0;              // > 0: q, k, v clamped to [-clip_qkv, clip_qkv] after the norms
};

// Where one token of a batch belongs: its sequence's KV cache and its position.
struct TokenSlot {
  KVCache* kv = nullptr;
  int64_t pos = 0;
};

// x: [n, hidden] normalised inputs; token t of the batch belongs at slots[t]
// (tokens of one sequence in order; several sequences may share a batch).
// Appends their keys/values at `layer`; writes out: [n, hidden].
// Token by token, a token's key and value are stored and then its query
// attends, so a sliding-window ring of exactly `window` slots suffices for
// any batch; every query's result is the same as when decoded alone.
void attention_forward(const AttentionWeights& w, const AttentionShape& s, const float* x,
                       std::span<const TokenSlot> slots, int64_t layer, float* out, Scratch& scratch,
                       ThreadPool* pool);

}  // namespace tern
