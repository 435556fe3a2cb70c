// The portable dense kernels: the reference for every SIMD path. Plain C++
// over 16 independent float lanes (see the summation order in
// dense_kernels.h); independent lanes let the compiler vectorize without
// reassociating anything.
#include "tern/kernels/float_mode.h"  // first: see there
#include <algorithm>

#include "tern/kernels/convert.h"
#include "tern/kernels/dense_kernels.h"
#include "tern/core/kernel_path.h"

namespace tern::detail {
namespace {

constexpr int kLanes = 16;

inline float fold_lanes(const float* lane) {
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = lane[l] + lane[l + 8];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

struct PortableTiles {
  template <TensorFormat F, int R, int T>
  static void tile(const uint8_t* w, int64_t w_stride, const float* x, int64_t ldx, int64_t cols,
                   float* y, int64_t ldy) {
    float acc[R][T][kLanes] = {};
    float wv[kLanes];
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      for (int r = 0; r < R; ++r) {
        convert_row<F>(w + r * w_stride, j, kLanes, wv);
        for (int t = 0; t < T; ++t) {
          const float* xt = x + t * ldx + j;
          for (int l = 0; l < kLanes; ++l) acc[r][t][l] = acc[r][t][l] + wv[l] * xt[l];
        }
      }
    }
    if (int64_t left = cols - j; left > 0) {
      for (int r = 0; r < R; ++r) {
        convert_row<F>(w + r * w_stride, j, left, wv);
        for (int t = 0; t < T; ++t) {
          const float* xt = x + t * ldx + j;
          for (int64_t l = 0; l < left; ++l) acc[r][t][l] = acc[r][t][l] + wv[l] * xt[l];
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ldy + r] = fold_lanes(acc[r][t]);
  }
};

void gemm_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const float* x, int64_t ldx,
               int64_t n_tokens, float* y, int64_t ldy) {
  gemm_rows_dispatch<PortableTiles>(w, row_begin, row_end, x, ldx, n_tokens, y, ldy);
}

float dot(const float* a, const float* b, int64_t n) {
  float result;
  PortableTiles::tile<TensorFormat::F32, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, b, 0, n,
                                               &result, 0);
  return result;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + a * x[i];
}

void weighted_rows(const float* weights, int64_t ldw, int64_t n_out, const float* rows, int64_t ldr,
                   int64_t n_rows, int64_t dim, float* out) {
  for (int64_t p = 0; p < n_rows; ++p)
    for (int64_t o = 0; o < n_out; ++o) axpy(weights[o * ldw + p], rows + p * ldr, out + o * dim, dim);
}

}  // namespace

const DenseKernels& portable_dense_kernels() {
  static const DenseKernels kernels{gemm_rows, dot, axpy, weighted_rows};
  return kernels;
}

const DenseKernels& active_dense_kernels() {
  // The AVX-512 path keeps the AVX2 dense kernels (same bits): dense
  // formats are bound by memory bandwidth, not by the vector width.
  if (active_kernel_path() != KernelPath::Portable) {
    if (const DenseKernels* k = avx2_dense_kernels()) return *k;
  }
  return portable_dense_kernels();
}

}  // namespace tern::detail
