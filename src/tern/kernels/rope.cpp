#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/rope.h"

#include <cmath>

#include "tern/core/error.h"

namespace tern {

std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("rope: head_dim {} must be even and positive", head_dim);
  if (!(theta > 0)) fail("rope: theta {} must be positive", theta);
  double divide = 1.0;
  switch (scaling.kind) {
    case RopeScaling::Kind::None: break;
    case RopeScaling::Kind::Linear:
      if (!(scaling.factor > 0)) fail("rope: linear scaling factor {} must be positive", scaling.factor);
      divide = scaling.factor;
      break;
  }
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(f / divide);
  }
  return inv_freq;
}

void rope_cos_sin(int64_t pos, const float* inv_freq, int64_t half, float* cos_out, float* sin_out) {
  for (int64_t i = 0; i < half; ++i) {
    double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope_apply(float* x, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  float* x1 = x;
  float* x2 = x + half;
  for (int64_t i = 0; i < half; ++i) {
    float a = x1[i], b = x2[i];
    x1[i] = a * cos[i] - b * sin[i];
    x2[i] = b * cos[i] + a * sin[i];
  }
}

void rope_apply_heads(float* x, int64_t n_heads, int64_t head_dim, const float* cos,
                      const float* sin) {
  for (int64_t h = 0; h < n_heads; ++h) rope_apply(x + h * head_dim, head_dim, cos, sin);
}

void rope(float* x, int64_t head_dim, int64_t pos, const float* inv_freq) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("rope: head_dim {} must be even and positive", head_dim);
  const int64_t half = head_dim / 2;
  constexpr int64_t kStack = 256;  // head_dim <= 512 needs no allocation
  float cos_stack[kStack], sin_stack[kStack];
  std::vector<float> heap;
  float* c = cos_stack;
  float* s = sin_stack;
  if (half > kStack) {
    heap.resize(static_cast<size_t>(2 * half));
    c = heap.data();
    s = heap.data() + half;
  }
  rope_cos_sin(pos, inv_freq, half, c, s);
  rope_apply(x, head_dim, c, s);
}

}  // namespace tern
