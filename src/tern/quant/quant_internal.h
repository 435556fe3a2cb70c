// Internal to quant/: helpers shared by the per-format files. Include it
// FIRST in a quant .cpp, before any other header. It fixes how the compiler
// may treat float code in the including file, whatever flags the library is
// built with (as kernels/float_mode.h does for the kernels):
// - no contraction of a * b + c into one fused rounding, so the quantizers
//   compute the same floats on every target and path as
//   tools/reference/gguf_quants.py (and, for all but Q4_K's search, as ggml's
//   scalar C on x86-64); the Q4_K / Q6_K scale searches and nearest_int would
//   otherwise change bytes (measured on ggml's own C built with
//   -march=native -ffp-contract=fast: 108 of 1280 Q4_K blocks differ);
// - no trapping math, which changes no computed value.
// First, because GCC does not inline a function compiled with other options
// into these (std::clamp, std::fabs, ... from headers included before).
// No include guard around the pragmas: they must reach each including file.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#endif

#ifndef TERN_QUANT_INTERNAL_H_
#define TERN_QUANT_INTERNAL_H_

#include <cstdint>
#include <cstring>

#include "tern/core/dtype.h"
#include "tern/core/error.h"
#include "tern/quant/blocks.h"

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

inline float load_f16(uint16_t h) {
  return f16_to_f32(h);
}

// Q4_K's scale search (q4_k.cpp fit_scale_min, and its SIMD lanes): the 21
// candidate numerators (-1 + 0.1 * c) + 15 (ggml's rmin, rdelta, nmax) in
// float; the order they are tried in (the even ones c = 0, 2, ..., 20, then
// c*, c* - 1 and c* + 1, clamped to [0, 20], around the best even one c*,
// which is 10 when none beats the seed: 14 fits instead of ggml's 21); and the
// code of v = iscale * (x - min): round half to even via
// 1.5 * 2^23 (exact below 2^22 in magnitude), then (r > 0 ? r : 0), then
// (r < 15 ? r : 15), so NaN gives 0: what _mm*_round_ps, max_ps(r, 0) and
// min_ps(r, 15) give for every input.
constexpr int kQ4KNumCandidates = 21;
struct Q4KCandidates {
  float v[kQ4KNumCandidates];
  constexpr Q4KCandidates() : v() {
    for (int c = 0; c < kQ4KNumCandidates; ++c) v[c] = (-1.0f + 0.1f * static_cast<float>(c)) + 15.0f;
  }
  constexpr float operator[](int c) const { return v[c]; }
};
inline constexpr Q4KCandidates kQ4KCandidates{};
constexpr int kQ4KCoarseStep = 2;
constexpr int kQ4KSeedCandidate = 10;  // numerator 15: the seed's
constexpr int kQ4KRefineOffsets[] = {0, -1, 1};

inline float q4_k_code(float v) {
  float r = (v + 12582912.0f) - 12582912.0f;
  r = r > 0.0f ? r : 0.0f;
  return r < 15.0f ? r : 15.0f;
}

// The quantizers with a SIMD version (quantize_x86.cpp) keep a portable one;
// all write identical bytes (tests/quant). The AVX2 one runs when the active
// kernel path (core/kernel_path.h, TERN_KERNELS) is avx2, or avx512 where
// there is no AVX-512 version; the AVX-512 one (Q4_K) on avx512.
bool quantize_with_avx2();
bool quantize_with_avx512();
void quantize_row_q8_0_portable(const float* x, void* blocks, int64_t n);
void quantize_row_q8_0_avx2(const float* x, void* blocks, int64_t n);
void quantize_row_q4_k_portable(const float* x, void* blocks, int64_t n);
void quantize_row_q4_k_avx2(const float* x, void* blocks, int64_t n);
void quantize_row_q4_k_avx512(const float* x, void* blocks, int64_t n);

// Stages of the Q4_K quantizer shared by both versions (q4_k.cpp).
// q4_k_fit_codes: the codes of a sub-block's fit, q4_k_code(fma(x, iscale,
// bias)) for its 32 elements (the SIMD fit returns iscale and bias; step 3
// needs the codes only where a sub-block's final scale is 0).
void q4_k_fit_codes(const float* x, float iscale, float bias, uint8_t* L);
// Step 3's inputs: each sub-block's final scale d[s] and min dm[s] (of 8).
void q4_k_final_scales(const BlockQ4K* y, float* d, float* dm);
void q4_k_pack_scales(const float* scales, const float* mins, BlockQ4K* y);
void q4_k_pack_codes(const uint8_t* L, BlockQ4K* y);

}  // namespace tern::quant_detail

#endif  // TERN_QUANT_INTERNAL_H_
