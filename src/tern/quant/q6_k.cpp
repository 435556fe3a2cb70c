// Q6_K: super-blocks of 256 weights in 16 sub-blocks of 16; within sub-block
// s, value = (d * scales[s]) * (code - 32) with a 6-bit code and an int8
// scale. Quantizer: ggml's quantize_row_q6_K_ref:
//  1. per sub-block, a symmetric scale from fit_symmetric_scale (ggml's
//     make_qx_quants, rmse_type 1: weights x^2, 19 candidate scales);
//  2. the sub-block scales quantized to int8 against the one of largest
//     magnitude, which maps to -128 (d = -max_scale / 128, stored as f16);
//  3. every element re-quantized against its final scale d * scales[s].
// Every float operation is in ggml's order; see quantize.h for the contract.
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

using namespace quant_detail;

namespace {

constexpr int kSub = 16;                // elements per sub-block
constexpr int kNumSub = kQK_K / kSub;   // 16
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: below it a group is zero

// Weighted sums of one candidate: sumlx = sum w x l, suml2 = sum w l^2, with
// l = clamp(round(iscale * x), -nmax, nmax - 1) and w = x^2.
void candidate_sums(const float* x, float iscale, int nmax, float* sumlx, float* suml2) {
  float slx = 0.0f, sl2 = 0.0f;
  for (int i = 0; i < kSub; ++i) {
    const float l = static_cast<float>(std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    const float w = x[i] * x[i];
    slx += w * x[i] * l;
    sl2 += w * l * l;
  }
  *sumlx = slx;
  *suml2 = sl2;
}

void store_codes(const float* x, float iscale, int nmax, int8_t* L) {
  for (int i = 0; i < kSub; ++i)
    L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
}

// ggml's make_qx_quants(n = 16, nmax, rmse_type = 1, no quant weights): the
// element of largest magnitude (signed) maps to -nmax; then the inverse scales
// -(nmax + 0.1 * is) / max for is = -9..9 are tried and the one maximising
// sumlx^2 / suml2 (least weighted squared error) kept, with the least-squares
// scale sumlx / suml2. L gets codes + nmax in [0, 2 nmax).
float fit_symmetric_scale(const float* x, int nmax, int8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < kSub; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < kSub; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  candidate_sums(x, iscale, nmax, &sumlx, &suml2);
  store_codes(x, iscale, nmax, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    candidate_sums(x, iscale, nmax, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store_codes(x, iscale, nmax, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_block(const float* x, BlockQ6K* y) {
  int8_t L[kQK_K];
  float scales[kNumSub];
  float max_scale = 0.0f;
  float max_abs_scale = 0.0f;
  for (int s = 0; s < kNumSub; ++s) {
    scales[s] = fit_symmetric_scale(x + kSub * s, 32, L + kSub * s);
    if (std::fabs(scales[s]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {  // all zero (or negligible): d = 0, all codes 0
    std::memset(y, 0, sizeof(BlockQ6K));
    return;
  }

  const float iscale = -128.0f / max_scale;
  y->d = f32_to_f16(1.0f / iscale);
  // The largest maps to -128; int conversion wraps as in ggml (never for finite scales).
  for (int s = 0; s < kNumSub; ++s)
    y->scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])) & 0xFF);

  const float d_all = load_f16(y->d);
  for (int s = 0; s < kNumSub; ++s) {
    const float d = d_all * static_cast<float>(y->scales[s]);
    if (d == 0.0f) continue;  // as ggml: keeps the codes of the fit
    for (int i = 0; i < kSub; ++i) {
      const int l = std::clamp(nearest_int(x[kSub * s + i] / d), -32, 31);
      L[kSub * s + i] = static_cast<int8_t>(l + 32);
    }
  }
  // Half h of 128: element l (l < 32) of quarter t goes to ql[64h + 32(t % 2) + l]
  // (low nibble for t < 2, high for t >= 2) and bits 2t..2t+1 of qh[32h + l].
  for (int h = 0; h < kQK_K / 128; ++h) {
    const int8_t* Lh = L + 128 * h;
    uint8_t* ql = y->ql + 64 * h;
    uint8_t* qh = y->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] =
          static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_row_q6_k(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK_K, "q6_k");
  auto* y = static_cast<BlockQ6K*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b) quantize_block(x + kQK_K * b, &y[b]);
}

void dequantize_row_q6_k(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQK_K, "q6_k");
  const auto* x = static_cast<const BlockQ6K*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = load_f16(x[b].d);
    for (int h = 0; h < kQK_K / 128; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace tern
