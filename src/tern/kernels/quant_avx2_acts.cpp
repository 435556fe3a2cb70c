// AVX2 activation quantizers for the quantized matvec: the same bytes as
// quant's reference quantize_row_q8_0 / quantize_row_q8_k (tested bit for
// bit), about 10x faster than the scalar reference (which calls roundf per
// element on a generic x86-64 build), so quantizing the activations stays
// small next to streaming the weights.
//
// Identical for every finite input (and for infinities). With NaN inputs the
// Q8_0 block maximum may differ: the reference's running `amax > a ? amax : a`
// lets a NaN survive only when it comes last, an order SIMD does not keep.
// Such a row gives NaN or garbage outputs either way.
#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/quant_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstring>

#include "tern/core/dtype.h"
#include "tern/quant/blocks.h"
#include "tern/quant/vec_dot.h"

namespace tern::detail {

#define TERN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace {

TERN_AVX2 inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

TERN_AVX2 inline int32_t hsum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 int32 (4 registers, elements in order) -> 32 int8 with saturation.
TERN_AVX2 inline __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// std::round (halves away from zero), then the reference's
// max(-127, truncate_to_int8(.)): NaN -> 0, clamp to [-127, 127].
TERN_AVX2 inline __m256i round_q8_0(__m256 p) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(p, t));  // exact
  __m256 away = _mm256_or_ps(_mm256_and_ps(p, sign_bit), _mm256_set1_ps(1.0f));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), away));
  r = _mm256_andnot_ps(_mm256_cmp_ps(r, r, _CMP_UNORD_Q), r);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvttps_epi32(r);
}

TERN_AVX2 void quantize_q8_0(const float* x, int64_t cols, BlockQ8_0* out, float* scales,
                             int32_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < cols / kQK8_0; ++b, x += kQK8_0) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float amax = hmax8(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    // F16C rounds to nearest even like f32_to_f16; NaN keeps the scalar
    // conversion's bits.
    const uint16_t hd = d == d ? static_cast<uint16_t>(_mm_extract_epi16(
                                     _mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT), 0))
                               : f32_to_f16(d);
    out[b].d = hd;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i i[4];
    for (int k = 0; k < 4; ++k) i[k] = round_q8_0(_mm256_mul_ps(v[k], vid));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), pack32(i[0], i[1], i[2], i[3]));
    scales[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(hd)));
    sums[b] = hsum8(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
  }
}

TERN_AVX2 void quantize_q8_k(const float* x, int64_t cols, BlockQ8K* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < cols / kQK_K; ++b, x += kQK_K) {
    // Reference: `if (|x| > amax)` skips NaN; max_ps(|x|, m) = |x| > m ? |x| : m does too.
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K / 8; ++k) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask), m);
    const float amax = hmax8(m);
    if (amax == 0.0f) {
      std::memset(&out[b], 0, sizeof(BlockQ8K));
      continue;
    }
    // The first element of largest magnitude, signed (strict > keeps the first).
    float max = 0.0f;
    const __m256 vamax = _mm256_set1_ps(amax);
    for (int k = 0; k < kQK_K / 8; ++k) {
      __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask);
      if (int mask = _mm256_movemask_ps(_mm256_cmp_ps(a, vamax, _CMP_EQ_OQ)); mask != 0) {
        max = x[8 * k + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    // ggml's nearest_int: (bits of v + 1.5 * 2^23) & 0x7fffff - 0x400000.
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
    const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
    for (int c = 0; c < kQK_K / 32; ++c) {
      __m256i i[4];
      for (int k = 0; k < 4; ++k) {
        __m256 s = _mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * c + 8 * k)), magic);
        __m256i n = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(s), mant), bias);
        i[k] = _mm256_min_epi32(_mm256_max_epi32(n, lo), hi);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs + 32 * c), pack32(i[0], i[1], i[2], i[3]));
      out[b].bsums[2 * c] = static_cast<int16_t>(hsum8(_mm256_add_epi32(i[0], i[1])));
      out[b].bsums[2 * c + 1] = static_cast<int16_t>(hsum8(_mm256_add_epi32(i[2], i[3])));
    }
    out[b].d = 1.0f / iscale;
  }
}

}  // namespace

void quantize_acts_avx2(TensorFormat weight_format, const float* x, int64_t cols,
                        const QuantActs& acts, int64_t t) {
  uint8_t* out = acts.blocks + t * acts.row_bytes;
  if (activation_format(weight_format) == ActivationFormat::Q8_0) {
    const int64_t at = t * acts.blocks_per_row;
    quantize_q8_0(x, cols, reinterpret_cast<BlockQ8_0*>(out), acts.scales + at, acts.sums + at);
  } else {
    quantize_q8_k(x, cols, reinterpret_cast<BlockQ8K*>(out));
  }
}

}  // namespace tern::detail

#endif
