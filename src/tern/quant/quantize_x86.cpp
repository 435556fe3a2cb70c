// x86 SIMD versions of the Q8_0 and Q4_K quantizers: the same bytes as the
// portable ones (q8_0.cpp, q4_k.cpp), several times faster, so `tern
// install` keeps up with the disk.
//  - Q8_0 (AVX2): a block's 32 elements in four registers; round-half-away-
//    from-zero built from truncation (exact: the fraction of a float is
//    exact). A block with a NaN or infinity, or whose reciprocal scale
//    overflows, goes to the portable code, whose (order-dependent) result for
//    those is the contract.
//  - Q4_K (AVX2, and AVX-512 for its search): the costly part is
//    fit_scale_min, 22 fits per sub-block, each a sequential float sum over
//    32 elements. The 8 sub-blocks of a super-block are independent, so they
//    run one per lane (q4_k_fit_simd.h, written once over the vector width:
//    8 lanes with AVX2, 16 with AVX-512, i.e. two super-blocks per register).
//    Each lane performs exactly the scalar code's operations in its order
//    (fused multiply-adds where it calls std::fma, nothing fused elsewhere:
//    contraction is off). Super-blocks holding a NaN or infinity go to the
//    portable code.
// tests/quant/test_quantize_simd.cpp checks byte equality with the portable
// versions on random rows and on edge cases (zeros, constant sub-blocks, NaN,
// inf, tiny and huge values).
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <cmath>

#include "tern/core/kernel_path.h"
#include "tern/quant/quantize.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 intrinsics (the undefined pass-through
// vector of unmasked operations, GCC bug 105593): not our code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define TERN_HAVE_AVX2_QUANT 1
// Contraction is off (quant_internal.h), so the compiler fuses nothing; Q4_K's
// search uses fused multiply-adds explicitly (V::fma), as its scalar code does.
#define TERN_AVX2 __attribute__((target("avx2")))
#define TERN_AVX2_FMA __attribute__((target("avx2,fma")))
#define TERN_AVX512Q __attribute__((target("avx2,fma,avx512f,avx512vl")))
#endif

namespace tern::quant_detail {

bool quantize_with_avx2() {
#if defined(TERN_HAVE_AVX2_QUANT)
  return active_kernel_path() != KernelPath::Portable;
#else
  return false;
#endif
}

bool quantize_with_avx512() {
#if defined(TERN_HAVE_AVX2_QUANT)
  return active_kernel_path() == KernelPath::Avx512;
#else
  return false;
#endif
}

#if defined(TERN_HAVE_AVX2_QUANT)

namespace {

constexpr int kSub = 32;               // Q4_K elements per sub-block
constexpr int kNumSub = kQK_K / kSub;  // 8: one per lane

TERN_AVX2 inline __m256 abs_ps(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

// nearest_int (quant_internal.h) on 8 lanes: round half to even via 1.5 * 2^23.
TERN_AVX2 inline __m256i nearest_int8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

TERN_AVX2 inline __m256i clamp_epi32(__m256i v, int lo, int hi) {
  return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
}

// 32 int32 values in [-128, 127] (q[0] elements 0-7, q[1] 8-15, ...) -> 32 bytes in order.
TERN_AVX2 inline __m256i pack_32_bytes(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  // packs work within 128-bit halves: 4-byte groups come out as
  // [q0 0-3, q1 0-3, q2 0-3, q3 0-3 | q0 4-7, q1 4-7, q2 4-7, q3 4-7].
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// In-place transpose of an 8x8 float matrix held as 8 rows.
TERN_AVX2 inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Vector traits for q4_k_fit_simd.h: 8 lanes of AVX2, masks as vectors.
struct V8 {
  using T = __m256;
  using M = __m256;
  static constexpr int kLanes = 8;
  TERN_AVX2_FMA static T load(const float* p) { return _mm256_load_ps(p); }
  TERN_AVX2_FMA static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  TERN_AVX2_FMA static void store_int(int32_t* p, T v) {  // p 32-byte aligned
    _mm256_store_si256(reinterpret_cast<__m256i*>(p), _mm256_cvttps_epi32(v));
  }
  TERN_AVX2_FMA static T zero() { return _mm256_setzero_ps(); }
  TERN_AVX2_FMA static T set1(float v) { return _mm256_set1_ps(v); }
  TERN_AVX2_FMA static T add(T a, T b) { return _mm256_add_ps(a, b); }
  TERN_AVX2_FMA static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  TERN_AVX2_FMA static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  TERN_AVX2_FMA static T div(T a, T b) { return _mm256_div_ps(a, b); }
  TERN_AVX2_FMA static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
  TERN_AVX2_FMA static T sqrt(T a) { return _mm256_sqrt_ps(a); }
  TERN_AVX2_FMA static T min(T a, T b) { return _mm256_min_ps(a, b); }  // a < b ? a : b
  TERN_AVX2_FMA static T max(T a, T b) { return _mm256_max_ps(a, b); }  // a > b ? a : b
  TERN_AVX2_FMA static T abs(T a) { return abs_ps(a); }
  TERN_AVX2_FMA static T neg(T a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  TERN_AVX2_FMA static T code(T v) {  // q4_k_code
    const T r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()), _mm256_set1_ps(15.0f));
  }
  TERN_AVX2_FMA static M gt(T a, T b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  TERN_AVX2_FMA static M eq(T a, T b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  TERN_AVX2_FMA static M mask_and(M a, M b) { return _mm256_and_ps(a, b); }
  TERN_AVX2_FMA static T blend(T a, T b, M m) { return _mm256_blendv_ps(a, b, m); }  // m ? b : a
};

// Vector traits for q4_k_fit_simd.h: 16 lanes of AVX-512, masks as __mmask16.
struct V16 {
  using T = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  TERN_AVX512Q static T load(const float* p) { return _mm512_load_ps(p); }
  TERN_AVX512Q static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  TERN_AVX512Q static void store_int(int32_t* p, T v) { _mm512_store_si512(p, _mm512_cvttps_epi32(v)); }
  TERN_AVX512Q static T zero() { return _mm512_setzero_ps(); }
  TERN_AVX512Q static T set1(float v) { return _mm512_set1_ps(v); }
  TERN_AVX512Q static T add(T a, T b) { return _mm512_add_ps(a, b); }
  TERN_AVX512Q static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  TERN_AVX512Q static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  TERN_AVX512Q static T div(T a, T b) { return _mm512_div_ps(a, b); }
  TERN_AVX512Q static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c, one rounding
  TERN_AVX512Q static T sqrt(T a) { return _mm512_sqrt_ps(a); }
  TERN_AVX512Q static T min(T a, T b) { return _mm512_min_ps(a, b); }  // a < b ? a : b
  TERN_AVX512Q static T max(T a, T b) { return _mm512_max_ps(a, b); }  // a > b ? a : b
  TERN_AVX512Q static T abs(T a) { return _mm512_abs_ps(a); }
  TERN_AVX512Q static T neg(T a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  TERN_AVX512Q static T code(T v) {  // q4_k_code
    const T r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()), _mm512_set1_ps(15.0f));
  }
  TERN_AVX512Q static M gt(T a, T b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  TERN_AVX512Q static M eq(T a, T b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  TERN_AVX512Q static M mask_and(M a, M b) { return static_cast<M>(a & b); }
  TERN_AVX512Q static T blend(T a, T b, M m) { return _mm512_mask_blend_ps(m, a, b); }  // m ? b : a
};

namespace avx2 {
using V = V8;
#define TERN_Q4K_FIT_TARGET TERN_AVX2_FMA
#include "tern/quant/q4_k_fit_simd.h"  // NOLINT(build/include): instantiated per target
#undef TERN_Q4K_FIT_TARGET
}  // namespace avx2

namespace avx512 {
using V = V16;
#define TERN_Q4K_FIT_TARGET TERN_AVX512Q
#include "tern/quant/q4_k_fit_simd.h"  // NOLINT(build/include): instantiated per target
#undef TERN_Q4K_FIT_TARGET
}  // namespace avx512

// Q4_K step 3 (q4_k_requantize) with 8 elements per instruction, given the
// final scales (q4_k_final_scales); sub-blocks with d[s] == 0 are left alone.
TERN_AVX2 void q4_k_requantize_avx2(const float* x, const float* d, const float* dm, uint8_t* L) {
  for (int s = 0; s < kNumSub; ++s) {
    if (d[s] == 0.0f) continue;
    const __m256 vd = _mm256_set1_ps(d[s]);
    const __m256 vdm = _mm256_set1_ps(dm[s]);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + kSub * s + 8 * k);
      q[k] = clamp_epi32(nearest_int8(_mm256_div_ps(_mm256_add_ps(v, vdm), vd)), 0, 15);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(L + kSub * s), pack_32_bytes(q[0], q[1], q[2], q[3]));
  }
}

// Q4_K step 3 with 16 elements per instruction (the same operations as
// q4_k_requantize_avx2, lane by lane).
TERN_AVX512Q void q4_k_requantize_avx512(const float* x, const float* d, const float* dm, uint8_t* L) {
  for (int s = 0; s < kNumSub; ++s) {
    if (d[s] == 0.0f) continue;
    const __m512 vd = _mm512_set1_ps(d[s]);
    const __m512 vdm = _mm512_set1_ps(dm[s]);
    for (int k = 0; k < 2; ++k) {
      const __m512 v = _mm512_div_ps(_mm512_add_ps(_mm512_loadu_ps(x + kSub * s + 16 * k), vdm), vd);
      // nearest_int: round half to even via 1.5 * 2^23, then clamp to [0, 15].
      const __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, _mm512_set1_ps(12582912.0f)));
      __m512i q = _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
      q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), _mm512_set1_epi32(15));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(L + kSub * s + 16 * k), _mm512_cvtepi32_epi8(q));
    }
  }
}

}  // namespace

TERN_AVX2 void quantize_row_q8_0_avx2(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK8_0, "q8_0");
  auto* y = static_cast<BlockQ8_0*>(blocks);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    __m256 v[4], a[4];
    int finite = 0xff;
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      a[k] = abs_ps(v[k]);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(a[k], inf, _CMP_LT_OQ));
    }
    if (finite != 0xff) {  // NaN or inf: the portable code defines the result
      quantize_row_q8_0_portable(x, &y[b], kQK8_0);
      continue;
    }
    // Without NaN, max is independent of order, as the scalar running max.
    const __m256 m8 = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) {  // a subnormal scale: saturating codes, as portable
      quantize_row_q8_0_portable(x, &y[b], kQK8_0);
      continue;
    }
    y[b].d = f32_to_f16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_mul_ps(v[k], vid);
      const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      // roundf: away from zero when the (exact) fraction is at least a half.
      const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(s, t)), half, _CMP_GE_OQ);
      const __m256 step = _mm256_or_ps(_mm256_and_ps(s, sign), one);
      __m256 r = _mm256_add_ps(t, _mm256_and_ps(up, step));
      r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
      q[k] = _mm256_cvttps_epi32(r);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack_32_bytes(q[0], q[1], q[2], q[3]));
  }
}

namespace {

using Q4KFit = void (*)(const float* x, float* scales, float* mins, float* iscales, float* biases);
using Q4KRequantize = void (*)(const float* x, const float* d, const float* dm, uint8_t* L);

// Q4_K rows: fits[r - 1] fits r registers of kPerRegister super-blocks at
// once; runs of the largest group, then the tail with as few registers as
// hold it (zero-padded to whole registers).
template <int kPerRegister, int kRegisters, const Q4KFit* fits, Q4KRequantize requantize>
TERN_AVX2 void quantize_row_q4_k_simd(const float* x, void* blocks, int64_t n) {
  constexpr int kGroup = kPerRegister * kRegisters;
  check_row_length(n, kQK_K, "q4_k");
  auto* y = static_cast<BlockQ4K*>(blocks);
  alignas(64) uint8_t L[kQK_K];
  alignas(64) float padded[kGroup * kQK_K];
  float scales[kGroup * kNumSub], mins[kGroup * kNumSub], iscales[kGroup * kNumSub], biases[kGroup * kNumSub];
  const __m256 inf = _mm256_set1_ps(INFINITY);
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb;) {
    const int count = static_cast<int>(nb - b < kGroup ? nb - b : kGroup);
    int finite = 0xff;
    for (int k = 0; k < count * kQK_K / 8; ++k)
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), inf, _CMP_LT_OQ));
    if (finite != 0xff) {  // NaN or inf: the portable code defines the result
      quantize_row_q4_k_portable(x, &y[b], count * kQK_K);
    } else {
      const int registers = (count + kPerRegister - 1) / kPerRegister;
      const float* src = x;
      if (count < registers * kPerRegister) {
        std::memcpy(padded, x, sizeof(float) * count * kQK_K);
        std::memset(padded + count * kQK_K, 0, sizeof(float) * (registers * kPerRegister - count) * kQK_K);
        src = padded;
      }
      fits[registers - 1](src, scales, mins, iscales, biases);
      for (int k = 0; k < count; ++k) {
        q4_k_pack_scales(scales + kNumSub * k, mins + kNumSub * k, &y[b + k]);
        float d[kNumSub], dm[kNumSub];
        q4_k_final_scales(&y[b + k], d, dm);
        requantize(x + kQK_K * k, d, dm, L);
        for (int s = 0; s < kNumSub; ++s)  // as ggml: a sub-block whose scale is 0 keeps the fit's codes
          if (d[s] == 0.0f)
            q4_k_fit_codes(x + kQK_K * k + kSub * s, iscales[kNumSub * k + s], biases[kNumSub * k + s], L + kSub * s);
        q4_k_pack_codes(L, &y[b + k]);
      }
    }
    b += count;
    x += static_cast<int64_t>(count) * kQK_K;
  }
}

// Registers per fit: 2 ymm (2 super-blocks) with AVX2, 4 zmm (8) with AVX-512:
// enough independent chains of adds (measured: AVX-512 with 2 zmm 2.16 ns per
// element, 3 zmm 1.98, 4 zmm 1.96; AVX2 with 4 ymm 2% faster than 2).
constexpr Q4KFit kAvx2Fits[] = {avx2::q4_k_fit_simd<1>, avx2::q4_k_fit_simd<2>};
constexpr Q4KFit kAvx512Fits[] = {avx512::q4_k_fit_simd<1>, avx512::q4_k_fit_simd<2>, avx512::q4_k_fit_simd<3>,
                                  avx512::q4_k_fit_simd<4>};

}  // namespace

void quantize_row_q4_k_avx2(const float* x, void* blocks, int64_t n) {
  quantize_row_q4_k_simd<1, 2, kAvx2Fits, q4_k_requantize_avx2>(x, blocks, n);
}

void quantize_row_q4_k_avx512(const float* x, void* blocks, int64_t n) {
  quantize_row_q4_k_simd<2, 4, kAvx512Fits, q4_k_requantize_avx512>(x, blocks, n);
}

#else  // no AVX2 build: never selected

void quantize_row_q8_0_avx2(const float* x, void* blocks, int64_t n) { quantize_row_q8_0_portable(x, blocks, n); }
void quantize_row_q4_k_avx2(const float* x, void* blocks, int64_t n) { quantize_row_q4_k_portable(x, blocks, n); }
void quantize_row_q4_k_avx512(const float* x, void* blocks, int64_t n) { quantize_row_q4_k_portable(x, blocks, n); }

#endif

}  // namespace tern::quant_detail
