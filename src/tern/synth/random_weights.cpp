#include "tern/synth/random_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// A tensor's stream depends only on (seed, tensor name).
uint64_t stream_seed(uint64_t seed, std::string_view tensor_name) {
  return seed * 0x2545f4914f6cdd1dull ^ xxh3_64(tensor_name.data(), tensor_name.size());
}

}  // namespace

WeightStream::WeightStream(uint64_t seed, std::string_view tensor_name, WeightInit init, int64_t fan_in) {
  state_ = stream_seed(seed, tensor_name);
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
    case WeightInit::Logit:  // attention sinks: logits of std 1, so they matter
      center_ = 0.0f;
      half_width_ = sqrt3;
      break;
    case WeightInit::LogDecay:  // A in [0.03, 0.33]: decays of 0.65-0.97 per token
      center_ = -2.3f;
      half_width_ = 1.2f;
      break;
    case WeightInit::Mxfp4Blocks:
    case WeightInit::Mxfp4Scales:
    case WeightInit::Mxfp4Dequantized:
      fail("tensor '{}': MXFP4 values come from Mxfp4BlockStream / Mxfp4ScaleStream", tensor_name);
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

Mxfp4BlockStream::Mxfp4BlockStream(uint64_t seed, std::string_view blocks_name)
    : state_(stream_seed(seed, blocks_name)) {}

void Mxfp4BlockStream::fill(uint8_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = splitmix64(state_);
    std::memcpy(dst + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = splitmix64(state_);
    std::memcpy(dst + i, &r, n - i);
  }
}

Mxfp4ScaleStream::Mxfp4ScaleStream(uint64_t seed, std::string_view scales_name, int64_t fan_in)
    : state_(stream_seed(seed, scales_name)) {
  const double target = 1.0 / (std::sqrt(static_cast<double>(std::max<int64_t>(1, fan_in))) * 3.87);
  base_ = 127 + static_cast<int>(std::lround(std::log2(target)));
}

void Mxfp4ScaleStream::fill(uint8_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const int offset = static_cast<int>(splitmix64(state_) % 3) - 1;
    dst[i] = static_cast<uint8_t>(std::clamp(base_ + offset, 1, 254));
  }
}

void dequantize_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t groups, float* out) {
  static constexpr float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int64_t g = 0; g < groups; ++g) {
    const float scale = std::ldexp(1.0f, static_cast<int>(scales[g]) - 127);
    for (int b = 0; b < 16; ++b) {
      const uint8_t byte = blocks[g * 16 + b];
      out[g * 32 + 2 * b] = kFp4[byte & 0x0F] * scale;
      out[g * 32 + 2 * b + 1] = kFp4[byte >> 4] * scale;
    }
  }
}

}  // namespace tern
