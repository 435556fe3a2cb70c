// MXFP4 (OCP microscaling): blocks of 32 E2M1 values sharing an E8M0 scale.
// Quantizer: ggml's quantize_row_mxfp4_ref. e = floor(log2(amax)) - 2 + 127,
// which puts amax in [4, 8) times the scale 2^(e-127), i.e. near the top code
// 6 (12 in the doubled table); each element then takes the first code of
// least |value - x| (ties go to the lower code index, so to the smaller
// magnitude, and 0 beats -0).
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

using namespace quant_detail;

namespace {

int nearest_mxfp4_code(float x, float scale) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * scale - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * scale - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void quantize_row_mxfp4(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQKMxfp4, "mxfp4");
  auto* y = static_cast<BlockMxfp4*>(blocks);
  constexpr int kHalf = kQKMxfp4 / 2;
  for (int64_t b = 0; b < n / kQKMxfp4; ++b, x += kQKMxfp4) {
    float amax = 0.0f;
    for (int j = 0; j < kQKMxfp4; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    // log2f from libm, as ggml: just below a power of two (relative distance
    // under ~2^-24 * |log2|) it rounds up to the integer, and so must we.
    // Clamped to [0, 254]: ggml's conversion is undefined below 2^-125 and for inf.
    uint8_t e = 0;
    if (amax > 0.0f) {
      const float biased = std::floor(std::log2(amax)) - 2.0f + 127.0f;
      e = static_cast<uint8_t>(std::clamp(biased, 0.0f, 254.0f));
    }
    const float scale = e8m0_to_float_half(e);
    y[b].e = e;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = nearest_mxfp4_code(x[j], scale);
      const int q1 = nearest_mxfp4_code(x[j + kHalf], scale);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_mxfp4(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQKMxfp4, "mxfp4");
  const auto* x = static_cast<const BlockMxfp4*>(blocks);
  constexpr int kHalf = kQKMxfp4 / 2;
  for (int64_t b = 0; b < n / kQKMxfp4; ++b, y += kQKMxfp4) {
    const float scale = e8m0_to_float_half(x[b].e);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[x[b].qs[j] & 0x0F]) * scale;
      y[j + kHalf] = static_cast<float>(kMxfp4Values[x[b].qs[j] >> 4]) * scale;
    }
  }
}

}  // namespace tern
