// Q4_0: blocks of 32 weights, value = d * (code - 8) with a 4-bit code.
// Quantizer: ggml's quantize_row_q4_0_ref. The scale comes from the element of
// largest magnitude *with its sign*, d = max / -8, so that element maps to
// code 0 exactly (value -8 d) and the other side reaches at most +7 d (code 15
// after clamping +8). Codes are truncate(x / d + 8.5), i.e. round half up.
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include <algorithm>
#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

using namespace quant_detail;

void quantize_row_q4_0(const float* x, void* blocks, int64_t n) {
  check_row_length(n, kQK4_0, "q4_0");
  auto* y = static_cast<BlockQ4_0*>(blocks);
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < n / kQK4_0; ++b, x += kQK4_0) {
    float amax = 0.0f;
    float max = 0.0f;  // the first element of largest magnitude, signed
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kHalf; ++j) {
      // x * id + 8.5 lies in [0.5, 16.5] for finite scales; clamping to 0 only
      // matters where ggml is undefined (see truncate_to_int8).
      const int q0 = std::clamp(truncate_to_int8(x[j] * id + 8.5f), 0, 15);
      const int q1 = std::clamp(truncate_to_int8(x[j + kHalf] * id + 8.5f), 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q4_0(const void* blocks, float* y, int64_t n) {
  check_row_length(n, kQK4_0, "q4_0");
  const auto* x = static_cast<const BlockQ4_0*>(blocks);
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < n / kQK4_0; ++b, y += kQK4_0) {
    const float d = load_f16(x[b].d);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 0x0F) - 8) * d;
      y[j + kHalf] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace tern
