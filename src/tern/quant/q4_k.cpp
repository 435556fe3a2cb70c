// Q4_K: super-blocks of 256 weights in 8 sub-blocks of 32; within sub-block
// s, value = (d * sc[s]) * code - dmin * m[s] with a 4-bit code and 6-bit
// sc, m. Quantizer: ggml's quantize_row_q4_K_ref except for how step 1
// scores a fit (see fit_scale_min):
//  1. per sub-block, fit x ~ scale * L + min (min <= 0) with L in [0, 15] by
//     fit_scale_min (ggml's make_qkx2_quants search), weighting element i by
//     sqrt(mean(x^2)) + |x_i|;
//  2. quantize the 8 scales and 8 -mins to 6 bits against their maxima:
//     d = max_scale / 63, dmin = max_min / 63 (stored as f16);
//  3. re-quantize every element against the final (f16, 6-bit) scale and min.
// Every float operation is in a fixed order (ggml's in steps 2 and 3); see
// quantize.h for the contract.
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

namespace quant_detail {

namespace {

constexpr int kSub = 32;               // elements per sub-block
constexpr int kNumSub = kQK_K / kSub;  // 8

// ggml's make_qkx2_quants (use_mad = false, nmax 15, rmin -1, rdelta 0.1,
// nstep 20): least-squares fit of x[i] ~ scale * L[i] + min (min <= 0) under
// weights w, seeded with the min-max fit, trying candidate inverse scales
// kQ4KCandidates[c] / (max - min); each candidate's codes come from the min of
// the best fit so far, are refit by weighted least squares (min clamped to 0
// when it comes out positive) and replace the best on a strict improvement.
// Three changes, for speed:
//  - 14 candidates instead of 21: the even ones, then the best even one again
//    (its codes now from the refit min) and its two odd neighbours
//    (quant_internal.h). Measured against all 21 in order (RMS error of the
//    dequantized rows, 4000 blocks each, tools/reference/gguf_quants.py):
//    Gaussian 1.0002, Student-t(3) 1.0001, Laplace 0.9998, offset uniform
//    1.0001; the even ones alone 1.0017-1.0041, every third then its
//    neighbours 1.0010-1.0029 (docs/RESULTS.md, issue 8).
//  - the per-element work uses fused multiply-adds (std::fma: codes of
//    fma(x, iscale, -iscale * min), and the sums of w L^2 and w x L);
//  - a fit's error is not summed element by element but follows from the
//    sums already taken: for the least-squares (scale, min) of codes L,
//    sum w (scale L + min - x)^2 = sum w x^2 - gain with
//    gain = scale * sum(w x L) + min * sum(w x); the seed (s0, m0), no
//    least-squares fit, has gain 2 s0 sum(w x L) + 2 m0 sum(w x)
//    - s0^2 sum(w L^2) - 2 s0 m0 sum(w L) - m0^2 sum(w). The search keeps the
//    largest gain.
// The bytes then differ from ggml's; the error does not grow
// (tests/reference/test_gguf_quants.py measures both against
// tools/reference/gguf_quants.py, which has both searches).
// quantize_x86.cpp does the same float operations per sub-block in the same
// order (one sub-block per lane), so both write equal bytes. Returns scale and
// stores -min (>= 0) in *neg_min.
float fit_scale_min(const float* x, const float* w, uint8_t* L, float* neg_min) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kSub; ++i) {
    min = x[i] < min ? x[i] : min;
    max = x[i] > max ? x[i] : max;
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < kSub; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  const float range = max - min;
  struct Sums {
    float l, l2, xl;
  };
  const auto sums = [&](float iscale, float code_min) {
    Sums s{0.0f, 0.0f, 0.0f};
    const float bias = -(iscale * code_min);
    for (int i = 0; i < kSub; ++i) {
      const float l = q4_k_code(std::fma(x[i], iscale, bias));
      const float wl = w[i] * l;
      s.l += wl;
      s.l2 = std::fma(wl, l, s.l2);
      s.xl = std::fma(wl, x[i], s.xl);
    }
    return s;
  };
  const float iscale = 15.0f / range;
  float scale = 1.0f / iscale;
  const Sums s0 = sums(iscale, min);
  float best_gain = (2.0f * scale * s0.xl + 2.0f * min * sum_x) -
                    (scale * scale * s0.l2 + 2.0f * scale * min * s0.l + min * min * sum_w);
  float best_iscale = iscale;
  float code_min = min;
  int best_c = kQ4KSeedCandidate;
  const auto try_candidate = [&](int c) {
    const float candidate_iscale = kQ4KCandidates[c] / range;
    const Sums s = sums(candidate_iscale, min);
    const float D = sum_w * s.l2 - s.l * s.l;
    float this_scale = (sum_w * s.xl - sum_x * s.l) / D;
    float this_min = (s.l2 * sum_x - s.l * s.xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = s.xl / s.l2;
    }
    const float gain = this_scale * s.xl + this_min * sum_x;
    if (D > 0 && gain > best_gain) {
      best_gain = gain;
      best_iscale = candidate_iscale;
      code_min = min;
      scale = this_scale;
      min = this_min;
      best_c = c;
    }
  };
  for (int c = 0; c < kQ4KNumCandidates; c += kQ4KCoarseStep) try_candidate(c);
  const int centre = best_c;
  for (const int offset : kQ4KRefineOffsets)
    try_candidate(std::clamp(centre + offset, 0, kQ4KNumCandidates - 1));
  q4_k_fit_codes(x, best_iscale, -(best_iscale * code_min), L);
  *neg_min = -min;
  return scale;
}

}  // namespace

// A fit's codes of the 32 elements of a sub-block.
void q4_k_fit_codes(const float* x, float iscale, float bias, uint8_t* L) {
  for (int i = 0; i < kSub; ++i) L[i] = static_cast<uint8_t>(q4_k_code(std::fma(x[i], iscale, bias)));
}

namespace {

// 6-bit code of v * inv, as ggml: round half to even, wrapped to uint8 (a
// negative scale would wrap to a large value), then capped at 63.
uint8_t six_bit(float v, float inv) {
  const auto q = static_cast<uint8_t>(nearest_int(inv * v) & 0xFF);
  return std::min<uint8_t>(63, q);
}

}  // namespace

// Step 1, portable: fits every sub-block (codes into L, scales, -mins).
void q4_k_fit_subblocks(const float* x, uint8_t* L, float* scales, float* mins) {
  float weights[kSub];
  for (int s = 0; s < kNumSub; ++s) {
    const float* xs = x + kSub * s;
    float sum_x2 = 0.0f;
    for (int i = 0; i < kSub; ++i) sum_x2 += xs[i] * xs[i];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int i = 0; i < kSub; ++i) weights[i] = av_x + std::fabs(xs[i]);
    scales[s] = fit_scale_min(xs, weights, L + kSub * s, &mins[s]);
  }
}

// Step 2: the 6-bit scales and mins against their maxima, and d, dmin.
void q4_k_pack_scales(const float* scales, const float* mins, BlockQ4K* y) {
  float max_scale = 0.0f;  // scales and mins are >= 0 (up to rounding)
  float max_min = 0.0f;
  for (int s = 0; s < kNumSub; ++s) {
    if (scales[s] > max_scale) max_scale = scales[s];
    if (mins[s] > max_min) max_min = mins[s];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int s = 0; s < kNumSub; ++s) {
    const uint8_t ls = six_bit(scales[s], inv_scale);
    const uint8_t lm = six_bit(mins[s], inv_min);
    if (s < 4) {
      y->scales[s] = ls;
      y->scales[s + 4] = lm;
    } else {  // low 4 bits in scales[s + 4], top 2 bits in bits 6..7 of scales[s - 4] / [s]
      y->scales[s + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y->scales[s - 4] = static_cast<uint8_t>(y->scales[s - 4] | ((ls >> 4) << 6));
      y->scales[s] = static_cast<uint8_t>(y->scales[s] | ((lm >> 4) << 6));
    }
  }
  y->d = f32_to_f16(max_scale / 63.0f);
  y->dmin = f32_to_f16(max_min / 63.0f);
}

// The 8 sub-blocks' final scales d[s] = d * sc[s] and mins dm[s] = dmin * m[s].
void q4_k_final_scales(const BlockQ4K* y, float* d, float* dm) {
  const float d_all = load_f16(y->d);
  const float dmin_all = load_f16(y->dmin);
  for (int s = 0; s < kNumSub; ++s) {
    uint8_t sc, m;
    q4_k_scale_min(s, y->scales, &sc, &m);
    d[s] = d_all * static_cast<float>(sc);
    dm[s] = dmin_all * static_cast<float>(m);
  }
}

// Step 3, portable: every element against its sub-block's final scale and min.
void q4_k_requantize(const float* x, const BlockQ4K* y, uint8_t* L) {
  float d[kNumSub], dm[kNumSub];
  q4_k_final_scales(y, d, dm);
  for (int s = 0; s < kNumSub; ++s) {
    if (d[s] == 0.0f) continue;  // as ggml: keeps the codes of the fit
    for (int i = 0; i < kSub; ++i) {
      const int l = nearest_int((x[kSub * s + i] + dm[s]) / d[s]);
      L[kSub * s + i] = static_cast<uint8_t>(std::clamp(l, 0, 15));
    }
  }
}

// Step 4: chunk c of 64 elements: element l in the low nibble of qs[32c + l], l + 32 in the high one.
void q4_k_pack_codes(const uint8_t* L, BlockQ4K* y) {
  for (int c = 0; c < kQK_K / 64; ++c)
    for (int l = 0; l < 32; ++l)
      y->qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
}

void quantize_row_q4_k_portable(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK_K, "q4_k");
  auto* y = static_cast<BlockQ4K*>(blocks);
  uint8_t L[kQK_K];
  float scales[kNumSub], mins[kNumSub];
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    q4_k_fit_subblocks(x, L, scales, mins);
    q4_k_pack_scales(scales, mins, &y[b]);
    q4_k_requantize(x, &y[b], L);
    q4_k_pack_codes(L, &y[b]);
  }
}

}  // namespace quant_detail

using namespace quant_detail;

void quantize_row_q4_k(const float* x, void* blocks, int64_t n) {
  if (quantize_with_avx512()) return quantize_row_q4_k_avx512(x, blocks, n);
  if (quantize_with_avx2()) return quantize_row_q4_k_avx2(x, blocks, n);
  quantize_row_q4_k_portable(x, blocks, n);
}

void dequantize_row_q4_k(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQK_K, "q4_k");
  const auto* x = static_cast<const BlockQ4K*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = load_f16(x[b].d);
    const float dmin = load_f16(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int c = 0; c < kQK_K / 64; ++c, q += 32) {
      uint8_t sc, m;
      q4_k_scale_min(2 * c, x[b].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      q4_k_scale_min(2 * c + 1, x[b].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

}  // namespace tern
