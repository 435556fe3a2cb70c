// The portable quantized-weight kernels: quant's reference vec_dot_*_q8 row
// by row, on activations from quant's reference quantize_activation. The
// reference every SIMD path is tested against, bit for bit.
#include "tern/kernels/float_mode.h"  // first: see there
#include <cstring>

#include "tern/core/dtype.h"
#include "tern/core/error.h"
#include "tern/core/kernel_path.h"
#include "tern/kernels/quant_kernels.h"
#include "tern/quant/vec_dot.h"

namespace tern::detail {
namespace {

constexpr int64_t align32(int64_t n) { return (n + 31) & ~int64_t{31}; }

int64_t act_blocks_per_row(TensorFormat weight_format, int64_t cols) {
  const int64_t block = activation_format(weight_format) == ActivationFormat::Q8_0 ? kQK8_0 : kQK_K;
  return cols / block;
}

void quantize(TensorFormat weight_format, const float* x, int64_t cols, const QuantActs& acts,
              int64_t t) {
  uint8_t* out = acts.blocks + t * acts.row_bytes;
  quantize_activation(weight_format, x, out, cols);
  if (activation_format(weight_format) != ActivationFormat::Q8_0) return;
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(out);
  for (int64_t b = 0; b < acts.blocks_per_row; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < kQK8_0; ++j) sum += blocks[b].qs[j];
    acts.scales[t * acts.blocks_per_row + b] = f16_to_f32(blocks[b].d);
    acts.sums[t * acts.blocks_per_row + b] = sum;
  }
}

void gemm_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts,
               int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = w.data + r * w.row_stride;
    for (int64_t t = 0; t < n_tokens; ++t)
      y[t * ldy + r] = vec_dot_q8(w.format, w.cols, row, acts.blocks + t * acts.row_bytes);
  }
}

}  // namespace

int64_t quant_acts_bytes(TensorFormat weight_format, int64_t cols, int64_t n_tokens) {
  const int64_t row = activation_bytes(weight_format, cols);  // throws on a bad length
  int64_t bytes = align32(row * n_tokens);
  if (activation_format(weight_format) == ActivationFormat::Q8_0)
    bytes += 2 * align32(act_blocks_per_row(weight_format, cols) * n_tokens * 4);
  return bytes;
}

QuantActs quant_acts_layout(TensorFormat weight_format, int64_t cols, int64_t n_tokens,
                            void* buffer) {
  QuantActs a;
  auto* p = static_cast<uint8_t*>(buffer);
  a.row_bytes = activation_bytes(weight_format, cols);
  a.blocks_per_row = act_blocks_per_row(weight_format, cols);
  a.blocks = p;
  if (activation_format(weight_format) == ActivationFormat::Q8_0) {
    const int64_t scales_at = align32(a.row_bytes * n_tokens);
    a.scales = reinterpret_cast<float*>(p + scales_at);
    a.sums = reinterpret_cast<int32_t*>(p + scales_at + align32(a.blocks_per_row * n_tokens * 4));
  }
  return a;
}

const QuantKernels& portable_quant_kernels() {
  static const QuantKernels kernels{quantize, gemm_rows};
  return kernels;
}

const QuantKernels& active_quant_kernels() {
  switch (active_kernel_path()) {
    case KernelPath::Avx512:
      if (const QuantKernels* k = avx512_quant_kernels()) return *k;
      break;
    case KernelPath::Avx2:
      if (const QuantKernels* k = avx2_quant_kernels()) return *k;
      break;
    case KernelPath::Portable: break;
  }
  return portable_quant_kernels();
}

}  // namespace tern::detail
