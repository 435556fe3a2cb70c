// Q8_K: ggml's 8-bit activation format for dot products with K-quant weights
// (256 per block, f32 scale, group sums). Quantizer: quantize_row_q8_K_ref:
// the element of largest magnitude maps to -127 exactly (iscale = -127 / max),
// codes are round-half-even, capped at 127.
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

using namespace quant_detail;

void quantize_row_q8_k(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK_K, "q8_k");
  auto* y = static_cast<BlockQ8K*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0.0f;
    float max = 0.0f;  // first element of largest magnitude, signed
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {  // ggml leaves bsums unwritten here; Tern zeroes them
      std::memset(&y[b], 0, sizeof(BlockQ8K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[b].qs[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * x[j]), -128, 127));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * g + i];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

void dequantize_row_q8_k(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQK_K, "q8_k");
  const auto* x = static_cast<const BlockQ8K*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K)
    for (int j = 0; j < kQK_K; ++j) y[j] = x[b].d * static_cast<float>(x[b].qs[j]);
}

}  // namespace tern
