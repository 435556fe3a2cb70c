#pragma once
// Internal: inline, exact decoders of 16-bit floats for the portable kernels
// (core/dtype.h has out-of-line versions; these are the per-element hot path).
#include <cstdint>
#include <cstring>

#include "tern/core/tensor_format.h"

namespace tern {

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bf16_bits_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

// Exact for every input, subnormals included: the 15 magnitude bits shifted
// into float position read as 2^-112 times the half value, so one multiply
// by 2^112 (exact: a power of two) rescales normals and subnormals alike.
// Needs denormals enabled (no DAZ), which is the default floating-point state.
inline float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t magnitude = h & 0x7fffu;
  uint32_t bits;
  if (magnitude >= 0x7c00u) {  // inf / NaN keep their payload
    bits = 0x7f800000u | ((magnitude & 0x3ffu) << 13);
  } else {
    float f = bits_to_f32(magnitude << 13) * 0x1p112f;
    std::memcpy(&bits, &f, 4);
  }
  return bits_to_f32(bits | sign);
}

// Decodes elements [j, j + n) of one row stored in format F.
template <TensorFormat F>
inline void convert_row(const uint8_t* row, int64_t j, int64_t n, float* out) {
  if constexpr (F == TensorFormat::F32) {
    std::memcpy(out, row + j * 4, static_cast<size_t>(n) * 4);
  } else {
    const uint8_t* p = row + j * 2;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      out[i] = F == TensorFormat::BF16 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
    }
  }
}

}  // namespace tern
