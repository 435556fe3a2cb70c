// Internal to quant/: helpers shared by the per-format files. Include last in
// a quant .cpp: it also forbids the compiler from fusing a * b + c into one
// rounding, whatever -march the library is built with, so the reference
// quantizers compute the same floats on every target as ggml's scalar C (and
// as tools/reference/gguf_quants.py).
// No include guard on purpose: the pragma must reach each including file.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#ifndef TERN_QUANT_INTERNAL_H_
#define TERN_QUANT_INTERNAL_H_

#include <cstdint>
#include <cstring>

#include "tern/core/dtype.h"
#include "tern/core/error.h"

namespace tern::quant_detail {

// Throws unless n is a non-negative multiple of the block size.
inline void check_row_length(int64_t n, int64_t block, const char* format) {
  if (n < 0 || n % block != 0)
    fail("row length {} is not a multiple of the {} block size {}", n, format, block);
}

// ggml's nearest_int: round half to even via the 1.5 * 2^23 trick. Exact for
// |v| <= 2^22; beyond that (never for finite scales) it returns the same
// wrapped value as ggml, which the reference in Python reproduces.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// float -> int8 by C truncation toward zero, defined for every input: NaN -> 0,
// saturating outside [-128, 127]. Identical to ggml's implicit conversion
// wherever that is defined (finite, in range); ggml's result is undefined
// behaviour otherwise (only when a block's scale under/overflows).
inline int truncate_to_int8(float v) {
  if (!(v == v)) return 0;
  if (v >= 127.0f) return 127;
  if (v <= -128.0f) return -128;
  return static_cast<int>(v);
}

// E8M0 exponent -> 2^(e - 128): half the OCP scale, because kMxfp4Values are
// the E2M1 values doubled. e = 0 and 1 give the subnormals 2^-128 and 2^-127.
inline float e8m0_to_float_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float load_f16(uint16_t h) { return f16_to_f32(h); }

}  // namespace tern::quant_detail

#endif  // TERN_QUANT_INTERNAL_H_
