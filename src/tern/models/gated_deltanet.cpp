#include "tern/models/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"

namespace tern {

namespace {

enum Slot { kProj = 0, kBa, kMixed, kConv, kOut, kKeys, kQueries };

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// torch.nn.functional.softplus (beta 1, threshold 20).
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x / sqrt(sum x^2 + 1e-6) (the sum in double, a fixed order), scaled by `scale`.
void l2_normalise(const float* x, int64_t n, float scale, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const auto inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-6));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * scale;
}

// One value head's delta-rule step on its state S [dk, dv]; writes o [dv].
void delta_step(float* S, const float* k, const float* q, const float* v, float decay, float beta,
                int64_t dk, int64_t dv, float* kv_mem, float* o) {
  std::fill(kv_mem, kv_mem + dv, 0.0f);
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv;
    const float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] *= decay;
      kv_mem[j] += row[j] * ki;
    }
  }
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (v[j] - kv_mem[j]) * beta;  // the delta
  std::fill(o, o + dv, 0.0f);
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] += ki * kv_mem[j];
      o[j] += row[j] * qi;
    }
  }
}

}  // namespace

void gated_deltanet_forward(const DeltaNetWeights& w, const DeltaNetShape& s, const float* x,
                            std::span<const TokenSlot> slots, int64_t layer, float* out,
                            Scratch& scratch, ThreadPool* pool) {
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t nk = s.key_heads, nv = s.value_heads, dk = s.key_dim, dv = s.value_dim,
                K = s.kernel;
  const int64_t r = nv / nk, kd = nk * dk, vd = nv * dv, C = s.conv_channels();
  const int64_t group = 2 * dk + 2 * r * dv;  // one key head's slice of in_proj_qkvz
  if (r * nk != nv) fail("gated deltanet: {} value heads for {} key heads", nv, nk);
  float* proj = scratch.get(kProj, n * (kd * 2 + vd * 2));
  float* ba = scratch.get(kBa, n * 2 * nv);
  float* mixed = scratch.get(kMixed, C);
  float* conv = scratch.get(kConv, C);
  float* o_all = scratch.get(kOut, n * vd);
  float* keys = scratch.get(kKeys, kd);
  float* queries = scratch.get(kQueries, kd);
  matmul(w.qkvz, x, n, proj, pool);
  matmul(w.ba, x, n, ba, pool);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < n; ++t) {
    const TokenSlot& slot = slots[static_cast<size_t>(t)];
    KVCache& kv = *slot.kv;
    if (kv.state_floats(layer) != s.state_floats())
      fail("layer {}: the KV cache holds a state of {} floats, linear attention needs {}", layer,
           kv.state_floats(layer), s.state_floats());
    float* state = kv.state(layer);
    if (slot.pos == 0) std::fill(state, state + s.state_floats(), 0.0f);  // a new sequence
    float* history = state;              // [K - 1, C], oldest first
    float* S_all = state + (K - 1) * C;  // [nv, dk, dv]
    const float* p = proj + t * (kd * 2 + vd * 2);
    // q|k|v in head order (value heads group-major, as transformers reshapes them).
    for (int64_t g = 0; g < nk; ++g) {
      const float* pg = p + g * group;
      std::copy(pg, pg + dk, mixed + g * dk);
      std::copy(pg + dk, pg + 2 * dk, mixed + kd + g * dk);
      std::copy(pg + 2 * dk, pg + 2 * dk + r * dv, mixed + 2 * kd + g * r * dv);
    }
    // Causal depthwise conv over the last K inputs, then silu; the history
    // shifts by one.
    for (int64_t c = 0; c < C; ++c) {
      const float* taps = w.conv + c * K;
      float acc = 0;
      for (int64_t i = 0; i + 1 < K; ++i) acc += taps[i] * history[i * C + c];
      conv[c] = acc + taps[K - 1] * mixed[c];
    }
    silu(conv, conv, C);
    if (K > 1) {
      std::copy(history + C, history + (K - 1) * C, history);
      std::copy(mixed, mixed + C, history + (K - 2) * C);
    }
    for (int64_t h = 0; h < nk; ++h) {
      l2_normalise(conv + kd + h * dk, dk, 1.0f, keys + h * dk);
      l2_normalise(conv + h * dk, dk, q_scale, queries + h * dk);
    }
    const float* b = ba + t * 2 * nv;
    float* o = o_all + t * vd;
    auto heads = [&](int64_t begin, int64_t end) {
      std::vector<float> kv_mem(static_cast<size_t>(dv));
      for (int64_t h = begin; h < end; ++h) {
        const int64_t g = h / r, j = h % r;  // key head, and the value head's index within it
        const float beta = sigmoid(b[g * 2 * r + j]);
        const float a = b[g * 2 * r + r + j];
        const float decay = std::exp(-std::exp(w.a_log[h]) * softplus(a + w.dt_bias[h]));
        delta_step(S_all + h * dk * dv, keys + g * dk, queries + g * dk, conv + 2 * kd + h * dv,
                   decay, beta, dk, dv, kv_mem.data(), o + h * dv);
        // Gated RMSNorm: rmsnorm(o) w silu(z).
        const float* z = p + g * group + 2 * dk + r * dv + j * dv;
        rmsnorm(o + h * dv, w.norm, dv, s.norm_eps, o + h * dv);
        for (int64_t i = 0; i < dv; ++i) o[h * dv + i] *= z[i] / (1.0f + std::exp(-z[i]));
      }
    };
    if (pool)
      pool->parallel_for(nv, std::max<int64_t>(1, nv / (4 * pool->size())), heads);
    else
      heads(0, nv);
  }
  matmul(w.out, o_all, n, out, pool);
}

}  // namespace tern
