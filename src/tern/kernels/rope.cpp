#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "tern/core/error.h"

namespace tern {

double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

double rope_attention_factor(const RopeScaling& scaling) {
  if (scaling.kind != RopeScaling::Kind::Yarn) return 1.0;
  if (scaling.mscale != 0 && scaling.mscale_all_dim != 0)
    return yarn_mscale(scaling.factor, scaling.mscale) / yarn_mscale(scaling.factor, scaling.mscale_all_dim);
  return yarn_mscale(scaling.factor, 1.0);
}

std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("rope: head_dim {} must be even and positive", head_dim);
  if (!(theta > 0)) fail("rope: theta {} must be positive", theta);
  if (scaling.kind != RopeScaling::Kind::None && !(scaling.factor > 0))
    fail("rope: scaling factor {} must be positive", scaling.factor);
  const int64_t half = head_dim / 2;
  const auto d = static_cast<double>(head_dim);
  // YaRN's correction range [low, high] in dims (Hugging Face: find_correction_range).
  double low = 0, high = 0;
  if (scaling.kind == RopeScaling::Kind::Yarn) {
    if (scaling.original_max_positions <= 0) fail("rope: yarn needs original_max_position_embeddings");
    const double orig = static_cast<double>(scaling.original_max_positions);
    auto dim_of = [&](double rotations) {
      return d * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
    };
    low = dim_of(scaling.beta_fast);
    high = dim_of(scaling.beta_slow);
    if (scaling.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1);
    if (low == high) high += 0.001;
  }
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / d);
    double v = f;
    switch (scaling.kind) {
      case RopeScaling::Kind::None: break;
      case RopeScaling::Kind::Linear: v = f / scaling.factor; break;
      case RopeScaling::Kind::Yarn: {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        v = (f / scaling.factor) * ramp + f * (1.0 - ramp);
        break;
      }
    }
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(v);
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
