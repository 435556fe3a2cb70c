// Q4_K: super-blocks of 256 weights in 8 sub-blocks of 32; within sub-block
// s, value = (d * sc[s]) * code - dmin * m[s] with a 4-bit code and 6-bit
// sc, m. Quantizer: ggml's quantize_row_q4_K_ref:
//  1. per sub-block, fit x ~ scale * L + min (min <= 0) with L in [0, 15] by
//     fit_scale_min (ggml's make_qkx2_quants), weighting element i by
//     sqrt(mean(x^2)) + |x_i|;
//  2. quantize the 8 scales and 8 -mins to 6 bits against their maxima:
//     d = max_scale / 63, dmin = max_min / 63 (stored as f16);
//  3. re-quantize every element against the final (f16, 6-bit) scale and min.
// Every float operation is in ggml's order; see quantize.h for the contract.
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

namespace quant_detail {

namespace {

constexpr int kSub = 32;               // elements per sub-block
constexpr int kNumSub = kQK_K / kSub;  // 8

// ggml's make_qkx2_quants with use_mad = false: least-squares fit of
// x[i] ~ scale * L[i] + min under weights w, min clamped to <= 0, trying
// nstep + 1 candidate inverse scales (rmin + rdelta * is + nmax) / (max - min)
// and keeping the one of least weighted squared error. Note (as in ggml) a
// better fit's min is used by the candidates after it. Returns scale and
// stores -min (>= 0) in *neg_min.
float fit_scale_min(const float* x, const float* w, int nmax, float rmin, float rdelta, int nstep,
                    uint8_t* L, float* neg_min) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kSub; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < kSub; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < kSub; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t Laux[kSub];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < kSub; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < kSub; ++i) {
        const float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        cur_error += w[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, kSub);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

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
    scales[s] = fit_scale_min(xs, weights, 15, -1.0f, 0.1f, 20, L + kSub * s, &mins[s]);
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

// Step 3, portable: every element against its sub-block's final scale and min.
void q4_k_requantize(const float* x, const BlockQ4K* y, uint8_t* L) {
  const float d_all = load_f16(y->d);
  const float dmin_all = load_f16(y->dmin);
  for (int s = 0; s < kNumSub; ++s) {
    uint8_t sc, m;
    q4_k_scale_min(s, y->scales, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // as ggml: keeps the codes of the fit
    const float dm = dmin_all * static_cast<float>(m);
    for (int i = 0; i < kSub; ++i) {
      const int l = nearest_int((x[kSub * s + i] + dm) / d);
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
