#include "tern/models/mla_attention.h"

#include <algorithm>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/attention.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"
#include "tern/models/kv_cache.h"

namespace tern {

namespace {

enum MlaSlot { kMlaQA = 0, kMlaQ, kMlaKvA, kMlaQLat, kMlaLat, kMlaLatHead, kMlaVHead, kMlaAttV, kMlaScores, kMlaCos, kMlaSin, kMlaTmp };

void add_row_bias(float* y, const float* bias, int64_t n, int64_t dim, int64_t stride) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) add(y + t * stride, bias, y + t * stride, dim);
}

// In-place RMSNorm of the first `dim` floats of n rows `stride` apart.
void norm_prefix_rows(float* x, int64_t n, int64_t dim, int64_t stride, const float* w, float eps, float* tmp) {
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm(x + t * stride, w, dim, eps, tmp);
    std::copy(tmp, tmp + dim, x + t * stride);
  }
}

// Rotates one rope vector of `dim` floats in place (de-interleaving first
// when interleaved) and scales it by YaRN's attention factor.
void rotate_rope(float* x, int64_t dim, const float* cos, const float* sin, bool interleave, float factor, float* tmp) {
  if (interleave) {
    const int64_t half = dim / 2;
    for (int64_t i = 0; i < half; ++i) {
      tmp[i] = x[2 * i];
      tmp[half + i] = x[2 * i + 1];
    }
    std::copy(tmp, tmp + dim, x);
  }
  rope_apply(x, dim, cos, sin);
  if (factor != 1.0f) scale(x, factor, dim);
}

}  // namespace

void mla_attention_forward(const MlaWeights& w, const MlaShape& s, const float* x, std::span<const TokenSlot> slots,
                           int64_t layer, float* out, Scratch& scratch, ThreadPool* pool) {
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t H = s.n_heads, rank = s.kv_lora_rank, qd = s.nope + s.rope, D = rank + s.rope;
  const int64_t kv_b_rows = s.nope + s.v;
  float* q = scratch.get(kMlaQ, n * H * qd);
  float* tmp = scratch.get(kMlaTmp, std::max({rank, s.rope, w.q_a.data ? w.q_a.rows : 0}));
  if (w.q_a.data) {
    const int64_t qr = w.q_a.rows;
    float* qa = scratch.get(kMlaQA, n * qr);
    matmul(w.q_a, x, n, qa, pool);
    add_row_bias(qa, w.q_a_bias, n, qr, qr);
    norm_prefix_rows(qa, n, qr, qr, w.q_a_norm, s.latent_norm_eps, tmp);
    matmul(w.q_b, qa, n, q, pool);
  } else {
    matmul(w.q, x, n, q, pool);
  }
  float* kva = scratch.get(kMlaKvA, n * D);
  matmul(w.kv_a, x, n, kva, pool);
  add_row_bias(kva, w.kv_a_bias, n, D, D);
  norm_prefix_rows(kva, n, rank, D, w.kv_a_norm, s.latent_norm_eps, tmp);

  // The key part of kv_b absorbed into each head's query: q_lat[t, h] =
  // [sum_d q_nope[t, h, d] * W_UK[h, d, :] | q_pe[t, h]], the sum over d in
  // order, so every element is computed the same whatever the split.
  float* qlat = scratch.get(kMlaQLat, n * H * D);
  auto absorb = [&](int64_t h_begin, int64_t h_end) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(rank));
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t t = 0; t < n; ++t) {
        float* ql = qlat + (t * H + h) * D;
        std::fill(ql, ql + rank, 0.0f);
        const float* qh = q + (t * H + h) * qd;
        std::copy(qh + s.nope, qh + qd, ql + rank);
      }
      for (int64_t d = 0; d < s.nope; ++d) {
        dequantize_row(w.kv_b, h * kv_b_rows + d, row.data());
        for (int64_t t = 0; t < n; ++t) axpy(q[(t * H + h) * qd + d], row.data(), qlat + (t * H + h) * D, rank);
      }
    }
  };
  if (pool) pool->parallel_for(H, 1, absorb);
  else absorb(0, H);

  int64_t keys_seen = 0;
  for (const TokenSlot& slot : slots) {
    if (slot.pos + 1 > slot.kv->capacity(layer))
      fail("layer {}: the KV cache keeps {} positions, attention needs {}", layer, slot.kv->capacity(layer),
           slot.pos + 1);
    if (slot.kv->kv_dim(layer) != D || !slot.kv->values_alias_keys())
      fail("layer {}: the KV cache is not a latent cache of {} floats per position", layer, D);
    keys_seen = std::max(keys_seen, slot.pos + 1);
  }
  const int64_t half = s.rope / 2;
  float* cos = scratch.get(kMlaCos, half);
  float* sin = scratch.get(kMlaSin, half);
  float* lat = scratch.get(kMlaLat, n * H * rank);
  float* scores = scratch.get(kMlaScores, attention_decode_scratch_floats(H, keys_seen));
  const AttentionHeads heads{H, 1, D, s.scale, nullptr, rank};
  for (int64_t t = 0; t < n; ++t) {
    KVCache& kv = *slots[static_cast<size_t>(t)].kv;
    const int64_t pos = slots[static_cast<size_t>(t)].pos;
    rope_cos_sin(pos, s.rope_inv_freq, half, cos, sin);
    float* kt = kva + t * D;
    rotate_rope(kt + rank, s.rope, cos, sin, s.rope_interleave, s.rope_factor, tmp);
    for (int64_t h = 0; h < H; ++h)
      rotate_rope(qlat + (t * H + h) * D + rank, s.rope, cos, sin, s.rope_interleave, s.rope_factor, tmp);
    std::copy(kt, kt + D, kv.keys(layer, pos));
    attention_decode(qlat + t * H * D, kv.ring(layer), 0, pos, heads, lat + t * H * rank, scores, pool);
  }

  // The value part of kv_b after the softmax, head by head over the batch:
  // v[t, h] = W_UV[h] lat[t, h].
  float* lat_h = scratch.get(kMlaLatHead, n * rank);
  float* v_h = scratch.get(kMlaVHead, n * s.v);
  float* attv = scratch.get(kMlaAttV, n * H * s.v);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < n; ++t) std::copy_n(lat + (t * H + h) * rank, rank, lat_h + t * rank);
    matmul(weight_rows(w.kv_b, h * kv_b_rows + s.nope, s.v), lat_h, n, v_h, pool);
    for (int64_t t = 0; t < n; ++t) std::copy_n(v_h + t * s.v, s.v, attv + (t * H + h) * s.v);
  }
  matmul(w.o, attv, n, out, pool);
  add_row_bias(out, w.o_bias, n, s.hidden, s.hidden);
}

}  // namespace tern
