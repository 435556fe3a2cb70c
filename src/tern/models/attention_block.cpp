#include "tern/models/attention_block.h"

#include <algorithm>
#include <cmath>

#include "tern/core/error.h"
#include "tern/kernels/attention.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"

namespace tern {

namespace {

enum Slot { kQ = 0, kK, kV, kAtt, kScores, kCos, kSin, kNormed, kQGate, kGate };

void add_bias(float* y, const float* bias, int64_t n, int64_t dim) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) add(y + t * dim, bias, y + t * dim, dim);
}

// In-place RMSNorm of each head_dim-sized head vector.
void norm_heads(float* x, int64_t heads, int64_t head_dim, const float* w, float eps, float* tmp) {
  if (!w) return;
  for (int64_t h = 0; h < heads; ++h) {
    rmsnorm(x + h * head_dim, w, head_dim, eps, tmp);
    std::copy(tmp, tmp + head_dim, x + h * head_dim);
  }
}

// In-place RMSNorm of each token's whole projection (dim floats).
void norm_rows(float* x, int64_t n, int64_t dim, const float* w, float eps, float* tmp) {
  if (!w) return;
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm(x + t * dim, w, dim, eps, tmp);
    std::copy(tmp, tmp + dim, x + t * dim);
  }
}

void clamp_all(float* x, int64_t count, float limit) {
  if (limit <= 0) return;
  for (int64_t i = 0; i < count; ++i) x[i] = std::clamp(x[i], -limit, limit);
}

}  // namespace

void attention_forward(const AttentionWeights& w, const AttentionShape& s, const float* x,
                       std::span<const TokenSlot> slots, int64_t layer, float* out, Scratch& scratch,
                       ThreadPool* pool) {
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
  const int64_t rotary = s.rotary_dim > 0 ? s.rotary_dim : s.head_dim;
  if (rotary > s.head_dim || rotary % 2 != 0)
    fail("attention: rotary_dim {} must be even and at most head_dim {}", rotary, s.head_dim);
  const int64_t half = rotary / 2;
  float* q = scratch.get(kQ, n * q_dim);
  float* k = scratch.get(kK, n * kv_dim);
  float* v = scratch.get(kV, n * kv_dim);
  float* att = scratch.get(kAtt, n * q_dim);
  float* cos = scratch.get(kCos, half);
  float* sin = scratch.get(kSin, half);
  float* tmp = scratch.get(kNormed, std::max(s.head_dim, (w.q_norm_whole || w.k_norm_whole) ? q_dim : 0));
  float* gate = nullptr;
  if (w.output_gate) {
    // [query, gate] per head: split into q and the gate.
    float* qg = scratch.get(kQGate, n * 2 * q_dim);
    gate = scratch.get(kGate, n * q_dim);
    matmul(w.q, x, n, qg, pool);
    add_bias(qg, w.q_bias, n, 2 * q_dim);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const float* src = qg + t * 2 * q_dim + h * 2 * s.head_dim;
        std::copy(src, src + s.head_dim, q + t * q_dim + h * s.head_dim);
        std::copy(src + s.head_dim, src + 2 * s.head_dim, gate + t * q_dim + h * s.head_dim);
      }
  } else {
    matmul(w.q, x, n, q, pool);
    add_bias(q, w.q_bias, n, q_dim);
  }
  matmul(w.k, x, n, k, pool);
  add_bias(k, w.k_bias, n, kv_dim);
  if (w.values_are_keys) {
    std::copy(k, k + n * kv_dim, v);
  } else {
    matmul(w.v, x, n, v, pool);
    add_bias(v, w.v_bias, n, kv_dim);
  }
  norm_rows(q, n, q_dim, w.q_norm_whole, s.norm_eps, tmp);
  norm_rows(k, n, kv_dim, w.k_norm_whole, s.norm_eps, tmp);
  clamp_all(q, n * q_dim, s.clip_qkv);
  clamp_all(k, n * kv_dim, s.clip_qkv);
  clamp_all(v, n * kv_dim, s.clip_qkv);
  int64_t keys_seen = 0;
  for (const TokenSlot& slot : slots) {
    const int64_t seen = s.window > 0 ? std::min(s.window, slot.pos + 1) : slot.pos + 1;
    if (seen > slot.kv->capacity(layer))
      fail("layer {}: the KV cache keeps {} positions, attention needs {}", layer, slot.kv->capacity(layer), seen);
    keys_seen = std::max(keys_seen, seen);
  }
  float* scores = scratch.get(kScores, attention_decode_scratch_floats(s.n_heads, keys_seen));
  const AttentionHeads heads{s.n_heads, s.n_kv_heads, s.head_dim, s.scale, w.sinks};
  for (int64_t t = 0; t < n; ++t) {
    KVCache& kv = *slots[static_cast<size_t>(t)].kv;
    const int64_t pos = slots[static_cast<size_t>(t)].pos;
    float* qt = q + t * q_dim;
    float* kt = k + t * kv_dim;
    norm_heads(qt, s.n_heads, s.head_dim, w.q_norm, s.norm_eps, tmp);
    norm_heads(kt, s.n_kv_heads, s.head_dim, w.k_norm, s.norm_eps, tmp);
    if (w.v_norm_unit)
      for (int64_t h = 0; h < s.n_kv_heads; ++h) {
        float* vh = v + t * kv_dim + h * s.head_dim;
        rmsnorm(vh, nullptr, s.head_dim, s.norm_eps, vh);
      }
    rope_cos_sin(pos, s.rope_inv_freq, half, cos, sin);
    if (rotary == s.head_dim) {
      rope_apply_heads(qt, s.n_heads, s.head_dim, cos, sin);
      rope_apply_heads(kt, s.n_kv_heads, s.head_dim, cos, sin);
    } else {
      for (int64_t h = 0; h < s.n_heads; ++h) rope_apply(qt + h * s.head_dim, rotary, cos, sin);
      for (int64_t h = 0; h < s.n_kv_heads; ++h) rope_apply(kt + h * s.head_dim, rotary, cos, sin);
    }
    std::copy(kt, kt + kv_dim, kv.keys(layer, pos));
    std::copy(v + t * kv_dim, v + (t + 1) * kv_dim, kv.values(layer, pos));
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    attention_decode(qt, kv.ring(layer), first, pos, heads, att + t * q_dim, scores, pool);
  }
  if (gate)
    for (int64_t i = 0; i < n * q_dim; ++i) att[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  matmul(w.o, att, n, out, pool);
  add_bias(out, w.o_bias, n, s.hidden);
}

}  // namespace tern
