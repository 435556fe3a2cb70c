// Q8_0: blocks of 32 weights, value = d * q with q an int8 and d an f16 scale.
// Quantizer: ggml's quantize_row_q8_0_ref (d = amax / 127, q = roundf(x / d)).
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

namespace quant_detail {

void quantize_row_q8_0_portable(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK8_0, "q8_0");
  auto* y = static_cast<BlockQ8_0*>(blocks);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    float amax = 0.0f;  // ggml's MAX(amax, |x|): a NaN element makes amax NaN
    for (int j = 0; j < kQK8_0; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;  // the reciprocal, as ggml: x * id, not x / d
    y[b].d = f32_to_f16(d);
    // roundf rounds halves away from zero; |x * id| <= 127 up to an ulp.
    for (int j = 0; j < kQK8_0; ++j)
      y[b].qs[j] = static_cast<int8_t>(std::max(-127, truncate_to_int8(std::round(x[j] * id))));
  }
}

}  // namespace quant_detail

using namespace quant_detail;

void quantize_row_q8_0(const float* x, void* blocks, int64_t n) {
  if (quantize_with_avx2()) return quantize_row_q8_0_avx2(x, blocks, n);
  quantize_row_q8_0_portable(x, blocks, n);
}

void dequantize_row_q8_0(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQK8_0, "q8_0");
  const auto* x = static_cast<const BlockQ8_0*>(blocks);
  for (int64_t b = 0; b < n / kQK8_0; ++b, y += kQK8_0) {
    const float d = load_f16(x[b].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace tern
