#include "tern/models/attention_block.h"

#include "tern/kernels/attention.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"

namespace tern {

namespace {

enum Slot { kQ = 0, kK, kV, kAtt, kScores, kCos, kSin, kNormed };

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

}  // namespace

void attention_forward(const AttentionWeights& w, const AttentionShape& s, const float* x, int64_t n,
                       int64_t start, KVCache& kv, int64_t layer, float* out, Scratch& scratch,
                       ThreadPool* pool) {
  const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
  const int64_t half = s.head_dim / 2;
  float* q = scratch.get(kQ, n * q_dim);
  float* k = scratch.get(kK, n * kv_dim);
  float* v = scratch.get(kV, n * kv_dim);
  float* att = scratch.get(kAtt, n * q_dim);
  float* cos = scratch.get(kCos, half);
  float* sin = scratch.get(kSin, half);
  float* tmp = scratch.get(kNormed, s.head_dim);
  matmul(w.q, x, n, q, pool);
  matmul(w.k, x, n, k, pool);
  matmul(w.v, x, n, v, pool);
  add_bias(q, w.q_bias, n, q_dim);
  add_bias(k, w.k_bias, n, kv_dim);
  add_bias(v, w.v_bias, n, kv_dim);
  for (int64_t t = 0; t < n; ++t) {
    float* qt = q + t * q_dim;
    float* kt = k + t * kv_dim;
    norm_heads(qt, s.n_heads, s.head_dim, w.q_norm, s.norm_eps, tmp);
    norm_heads(kt, s.n_kv_heads, s.head_dim, w.k_norm, s.norm_eps, tmp);
    rope_cos_sin(start + t, s.rope_inv_freq, half, cos, sin);
    rope_apply_heads(qt, s.n_heads, s.head_dim, cos, sin);
    rope_apply_heads(kt, s.n_kv_heads, s.head_dim, cos, sin);
    std::copy(kt, kt + kv_dim, kv.keys(layer, start + t));
    std::copy(v + t * kv_dim, v + (t + 1) * kv_dim, kv.values(layer, start + t));
  }
  float* scores = scratch.get(kScores, attention_decode_scratch_floats(s.n_heads, start + n));
  for (int64_t t = 0; t < n; ++t)
    attention_decode(q + t * q_dim, kv.keys(layer), kv.values(layer), start + t + 1, s.n_heads, s.n_kv_heads,
                     s.head_dim, s.scale, att + t * q_dim, scores, pool);
  matmul(w.o, att, n, out, pool);
  add_bias(out, w.o_bias, n, s.hidden);
}

}  // namespace tern
