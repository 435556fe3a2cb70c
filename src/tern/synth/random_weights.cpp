#include "tern/synth/random_weights.h"

#include <cmath>

#include "tern/core/error.h"
#include "tern/core/hash.h"

namespace tern {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

WeightStream::WeightStream(uint64_t seed, std::string_view tensor_name, WeightInit init, int64_t fan_in) {
  state_ = seed * 0x2545f4914f6cdd1dull ^ xxh3_64(tensor_name.data(), tensor_name.size());
  // A uniform distribution on [c - w, c + w] has standard deviation w / sqrt(3).
  const float inv_sqrt_fan_in = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(1, fan_in)));
  const float sqrt3 = std::sqrt(3.0f);
  switch (init) {
    case WeightInit::Ones:  // norm weights: around 1, varied so a missed multiply shows
      center_ = 1.0f;
      half_width_ = 0.25f;
      break;
    case WeightInit::Linear:
      center_ = 0.0f;
      half_width_ = sqrt3 * inv_sqrt_fan_in;
      break;
    case WeightInit::Router:  // logits with std ~2: peaked but varied routing
      center_ = 0.0f;
      half_width_ = 2.0f * sqrt3 * inv_sqrt_fan_in;
      break;
    case WeightInit::Embedding:
      center_ = 0.0f;
      half_width_ = sqrt3;
      break;
    case WeightInit::Zeros:  // biases: small but non-zero so they are exercised
      center_ = 0.0f;
      half_width_ = 0.1f;
      break;
  }
}

float WeightStream::next() {
  // 24 random bits -> uniform in [-1, 1).
  uint64_t r = splitmix64(state_);
  float u = static_cast<float>(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
  return center_ + half_width_ * u;
}

void WeightStream::fill(void* dst, size_t n, DType dtype) {
  switch (dtype) {
    case DType::F32: {
      auto* p = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = next();
      break;
    }
    case DType::BF16: {
      auto* p = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(next());
      break;
    }
    case DType::F16: {
      auto* p = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = f32_to_f16(next());
      break;
    }
    default:
      fail("synth can write F32, BF16 or F16 weights, not {}", dtype_name(dtype));
  }
}

}  // namespace tern
