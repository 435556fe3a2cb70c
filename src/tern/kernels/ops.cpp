#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/kernels/dense_kernels.h"
#include "tern/kernels/fast_exp.h"

namespace tern {
namespace {

// Sum of f(x[i]) in double: element i goes to partial sum i % 8; partials fold
// pairwise in a fixed order. Independent partials let the compiler vectorize
// without changing the order.
template <typename F>
double sum8(const float* x, int64_t n, F f) {
  double p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) p[l] += f(x[i + l]);
  for (int l = 0; i < n; ++i, ++l) p[l] += f(x[i]);
  return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

}  // namespace

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  if (n <= 0) return;
  double ss = sum8(x, n, [](float v) { return static_cast<double>(v) * v; });
  float s = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * s) * w[i];
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  // x - max <= 0, so exp never overflows; the max element contributes 1.
  // NaN needs no branch: a NaN input, +inf, or all -inf (-inf - -inf) makes
  // the sum NaN, and so every output.
  for (int64_t i = 0; i < n; ++i) x[i] = detail::fast_exp(x[i] - max);
  double sum = sum8(x, n, [](float v) { return static_cast<double>(v); });
  // 1/sum in double, then one double product per element: the rounding to
  // float dominates, and a multiply is much cheaper than a divide.
  const double inv = 1.0 / sum;
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<double>(x[i]) * inv);
}

void swiglu_clamped(const float* gate, const float* up, float* out, int64_t n, float limit, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = (u + 1.0f) * (g / (1.0f + detail::fast_exp(-(alpha * g))));
  }
}

void silu(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] / (1.0f + detail::fast_exp(-x[i]));
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + detail::fast_exp(-g)) * up[i];
  }
}

void geglu_tanh(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void softcap(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  if (n > 0) detail::active_dense_kernels().axpy(a, x, y, n);
}

float dot(const float* a, const float* b, int64_t n) {
  return detail::active_dense_kernels().dot(a, b, std::max<int64_t>(n, 0));
}

}  // namespace tern
