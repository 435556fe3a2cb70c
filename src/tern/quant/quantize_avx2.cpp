// AVX2 versions of the Q8_0 and Q4_K quantizers: the same bytes as the
// portable ones (q8_0.cpp, q4_k.cpp, which follow ggml's reference), several
// times faster, so `tern install` keeps up with the disk.
//  - Q8_0: a block's 32 elements in four registers; round-half-away-from-zero
//    built from truncation (exact: the fraction of a float is exact). A block
//    with a NaN or infinity, or whose reciprocal scale overflows, goes to the
//    portable code, whose (order-dependent) result for those is the contract.
//  - Q4_K: the costly part is fit_scale_min, 21 candidate scales per
//    sub-block, each a sequential float sum over 32 elements. The 8
//    sub-blocks of a super-block are independent, so sub-block s runs in lane
//    s of every register and each lane performs exactly the scalar code's
//    operations in the scalar code's order (no fused multiply-add: this file
//    is compiled without FMA and with contraction off). Data-dependent
//    branches become per-lane masks.
// tests/quant/test_quant.cpp checks byte equality with the portable versions
// on random rows and on edge cases (zeros, constant sub-blocks, NaN, inf,
// tiny and huge values).
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <cmath>

#include "tern/core/kernel_path.h"
#include "tern/quant/quantize.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TERN_HAVE_AVX2_QUANT 1
// No "fma": the compiler must not fuse a multiply and an add.
#define TERN_AVX2 __attribute__((target("avx2")))
#endif

namespace tern::quant_detail {

bool quantize_with_avx2() {
#if defined(TERN_HAVE_AVX2_QUANT)
  return active_kernel_path() != KernelPath::Portable;
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

// Q4_K step 1 (q4_k.cpp: q4_k_fit_subblocks + fit_scale_min with nmax 15,
// rmin -1, rdelta 0.1, nstep 20) for all 8 sub-blocks of B super-blocks at
// once: super-block b's sub-block s in lane s of the b-th register of each
// pair. B = 2 gives the out-of-order core two independent chains of adds.
template <int B>
TERN_AVX2 void q4_k_fit_avx2(const float* x, uint8_t* L, float* scales, float* mins) {
  constexpr int nmax = 15, nstep = 20;
  constexpr float rmin = -1.0f, rdelta = 0.1f;
  // X[i][b], lane s = x[256 b + 32 s + i]; W[i][b] the weights of those elements.
  __m256 X[kSub][B], W[kSub][B];
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < kSub / 8; ++g) {
      __m256 rows[8];
      for (int s = 0; s < kNumSub; ++s) rows[s] = _mm256_loadu_ps(x + kQK_K * b + kSub * s + 8 * g);
      transpose8(rows);
      for (int j = 0; j < 8; ++j) X[8 * g + j][b] = rows[j];
    }
  const __m256 zero = _mm256_setzero_ps();
  __m256 min[B], max[B], sum_w[B], sum_x[B], degenerate[B], scale[B], best_error[B];
  for (int b = 0; b < B; ++b) {
    __m256 sum_x2 = zero;
    for (int i = 0; i < kSub; ++i) sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(X[i][b], X[i][b]));
    const __m256 av_x = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32.0f)));
    for (int i = 0; i < kSub; ++i) W[i][b] = _mm256_add_ps(av_x, abs_ps(X[i][b]));
    min[b] = X[0][b];
    max[b] = X[0][b];
    sum_w[b] = W[0][b];
    sum_x[b] = _mm256_mul_ps(sum_w[b], X[0][b]);
    for (int i = 1; i < kSub; ++i) {
      min[b] = _mm256_min_ps(X[i][b], min[b]);  // X < min ? X : min, as `if (x < min) min = x`
      max[b] = _mm256_max_ps(X[i][b], max[b]);
      sum_w[b] = _mm256_add_ps(sum_w[b], W[i][b]);
      sum_x[b] = _mm256_add_ps(sum_x[b], _mm256_mul_ps(W[i][b], X[i][b]));
    }
    min[b] = _mm256_blendv_ps(min[b], zero, _mm256_cmp_ps(min[b], zero, _CMP_GT_OQ));
    // A constant sub-block (max == min) keeps L = 0, scale 0, min: its lanes
    // compute garbage below that is never accepted.
    degenerate[b] = _mm256_cmp_ps(max[b], min[b], _CMP_EQ_OQ);
  }
  __m256 Lf[kSub][B], Laux[kSub][B];
  for (int b = 0; b < B; ++b) {
    const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(static_cast<float>(nmax)), _mm256_sub_ps(max[b], min[b]));
    scale[b] = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
    best_error[b] = zero;
    for (int i = 0; i < kSub; ++i) {
      const __m256i l = clamp_epi32(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(X[i][b], min[b]))), 0, nmax);
      Lf[i][b] = _mm256_cvtepi32_ps(l);
      const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale[b], Lf[i][b]), min[b]), X[i][b]);
      best_error[b] = _mm256_add_ps(best_error[b], _mm256_mul_ps(W[i][b], _mm256_mul_ps(diff, diff)));
    }
  }
  for (int is = 0; is <= nstep; ++is) {
    const float numerator = rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax);
    __m256 iscale[B], sum_l[B], sum_l2[B], sum_xl[B];
    for (int b = 0; b < B; ++b) {
      iscale[b] = _mm256_div_ps(_mm256_set1_ps(numerator), _mm256_sub_ps(max[b], min[b]));
      sum_l[b] = sum_l2[b] = sum_xl[b] = zero;
    }
    for (int i = 0; i < kSub; ++i)
      for (int b = 0; b < B; ++b) {
        const __m256i l = clamp_epi32(nearest_int8(_mm256_mul_ps(iscale[b], _mm256_sub_ps(X[i][b], min[b]))), 0, nmax);
        const __m256 fl = _mm256_cvtepi32_ps(l);
        Laux[i][b] = fl;
        const __m256 wfl = _mm256_mul_ps(W[i][b], fl);
        sum_l[b] = _mm256_add_ps(sum_l[b], wfl);
        sum_l2[b] = _mm256_add_ps(sum_l2[b], _mm256_mul_ps(wfl, fl));
        sum_xl[b] = _mm256_add_ps(sum_xl[b], _mm256_mul_ps(wfl, X[i][b]));
      }
    __m256 d_positive[B], this_scale[B], this_min[B], cur_error[B];
    int any = 0;
    for (int b = 0; b < B; ++b) {
      const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w[b], sum_l2[b]), _mm256_mul_ps(sum_l[b], sum_l[b]));
      d_positive[b] = _mm256_andnot_ps(degenerate[b], _mm256_cmp_ps(D, zero, _CMP_GT_OQ));
      any |= _mm256_movemask_ps(d_positive[b]);
      this_scale[b] = _mm256_div_ps(
          _mm256_sub_ps(_mm256_mul_ps(sum_w[b], sum_xl[b]), _mm256_mul_ps(sum_x[b], sum_l[b])), D);
      this_min[b] = _mm256_div_ps(
          _mm256_sub_ps(_mm256_mul_ps(sum_l2[b], sum_x[b]), _mm256_mul_ps(sum_l[b], sum_xl[b])), D);
      const __m256 min_positive = _mm256_cmp_ps(this_min[b], zero, _CMP_GT_OQ);
      this_min[b] = _mm256_blendv_ps(this_min[b], zero, min_positive);
      this_scale[b] = _mm256_blendv_ps(this_scale[b], _mm256_div_ps(sum_xl[b], sum_l2[b]), min_positive);
      cur_error[b] = zero;
    }
    if (any == 0) continue;
    for (int i = 0; i < kSub; ++i)
      for (int b = 0; b < B; ++b) {
        const __m256 diff =
            _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(this_scale[b], Laux[i][b]), this_min[b]), X[i][b]);
        cur_error[b] = _mm256_add_ps(cur_error[b], _mm256_mul_ps(W[i][b], _mm256_mul_ps(diff, diff)));
      }
    for (int b = 0; b < B; ++b) {
      const __m256 better = _mm256_and_ps(d_positive[b], _mm256_cmp_ps(cur_error[b], best_error[b], _CMP_LT_OQ));
      if (_mm256_movemask_ps(better) == 0) continue;
      for (int i = 0; i < kSub; ++i) Lf[i][b] = _mm256_blendv_ps(Lf[i][b], Laux[i][b], better);
      best_error[b] = _mm256_blendv_ps(best_error[b], cur_error[b], better);
      scale[b] = _mm256_blendv_ps(scale[b], this_scale[b], better);
      min[b] = _mm256_blendv_ps(min[b], this_min[b], better);
    }
  }
  for (int b = 0; b < B; ++b) {
    _mm256_storeu_ps(scales + kNumSub * b, _mm256_blendv_ps(scale[b], zero, degenerate[b]));
    _mm256_storeu_ps(mins + kNumSub * b, _mm256_xor_ps(min[b], _mm256_set1_ps(-0.0f)));  // -min
    // Codes back to element order (a constant sub-block's are 0).
    alignas(32) int32_t codes[kSub][8];
    for (int i = 0; i < kSub; ++i)
      _mm256_store_si256(reinterpret_cast<__m256i*>(codes[i]),
                         _mm256_cvttps_epi32(_mm256_blendv_ps(Lf[i][b], zero, degenerate[b])));
    for (int s = 0; s < kNumSub; ++s)
      for (int i = 0; i < kSub; ++i) L[kQK_K * b + kSub * s + i] = static_cast<uint8_t>(codes[i][s]);
  }
}

// Q4_K step 3 (q4_k_requantize) with 8 elements per instruction.
TERN_AVX2 void q4_k_requantize_avx2(const float* x, const BlockQ4K* y, uint8_t* L) {
  const float d_all = load_f16(y->d);
  const float dmin_all = load_f16(y->dmin);
  for (int s = 0; s < kNumSub; ++s) {
    uint8_t sc, m;
    q4_k_scale_min(s, y->scales, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the codes of the fit
    const __m256 vd = _mm256_set1_ps(d);
    const __m256 vdm = _mm256_set1_ps(dmin_all * static_cast<float>(m));
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + kSub * s + 8 * k);
      q[k] = clamp_epi32(nearest_int8(_mm256_div_ps(_mm256_add_ps(v, vdm), vd)), 0, 15);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(L + kSub * s), pack_32_bytes(q[0], q[1], q[2], q[3]));
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

TERN_AVX2 void quantize_row_q4_k_avx2(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK_K, "q4_k");
  auto* y = static_cast<BlockQ4K*>(blocks);
  alignas(32) uint8_t L[2 * kQK_K];
  float scales[2 * kNumSub], mins[2 * kNumSub];
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb;) {
    const int pair = nb - b >= 2 ? 2 : 1;
    if (pair == 2) q4_k_fit_avx2<2>(x, L, scales, mins);
    else q4_k_fit_avx2<1>(x, L, scales, mins);
    for (int k = 0; k < pair; ++k, ++b, x += kQK_K) {
      q4_k_pack_scales(scales + kNumSub * k, mins + kNumSub * k, &y[b]);
      q4_k_requantize_avx2(x, &y[b], L + kQK_K * k);
      q4_k_pack_codes(L + kQK_K * k, &y[b]);
    }
  }
}

#else  // no AVX2 build: never selected

void quantize_row_q8_0_avx2(const float* x, void* blocks, int64_t n) { quantize_row_q8_0_portable(x, blocks, n); }
void quantize_row_q4_k_avx2(const float* x, void* blocks, int64_t n) { quantize_row_q4_k_portable(x, blocks, n); }

#endif

}  // namespace tern::quant_detail
