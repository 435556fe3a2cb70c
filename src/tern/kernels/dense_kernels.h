#pragma once
// Internal to kernels/: the per-path dense dot-product kernels and the loop
// that drives them. matvec, matmul, dot and attention all reduce to
// gemm_rows, so they share one summation order per path.
//
// The summation order ("16-lane order") of every dot product of length n:
//   element j is added, in increasing j, into lane j % 16 (starting at +0);
//   lanes fold as s[l] = lane[l] + lane[l + 8] for l < 8;
//   result = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)).
// AVX2 forms each lane update with one fused multiply-add (16 lanes = two
// 8-float registers); portable multiplies, rounds, then adds. The order does
// not depend on which rows or tokens are computed together, so matvec and
// matmul (and any thread split) give bit-identical results within a path.
#include <algorithm>
#include <cstdint>

#include "tern/core/error.h"
#include "tern/core/tensor_format.h"

namespace tern::detail {

// Rows of a matrix as the dot kernels see them: row r starts at
// data + r * row_stride bytes and holds cols elements in `format`.
struct RowsRef {
  const uint8_t* data;
  TensorFormat format;
  int64_t row_stride;  // bytes
  int64_t cols;
};

// y[t * ldy + r] = dot(row r, x + t * ldx) for r in [row_begin, row_end) and
// t in [0, n_tokens).
using GemmRowsFn = void (*)(const RowsRef& w, int64_t row_begin, int64_t row_end, const float* x,
                            int64_t ldx, int64_t n_tokens, float* y, int64_t ldy);

struct DenseKernels {
  GemmRowsFn gemm_rows;
  float (*dot)(const float* a, const float* b, int64_t n);  // 16-lane order
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y[i] += a * x[i]
  // out[o * dim + d] += sum over p of weights[o * ldw + p] * rows[p * ldr + d]
  // for o < n_out, d < dim, adding p = 0, 1, ... in order, each step exactly
  // as axpy would. Reads every row once for all n_out outputs (the value
  // rows of attention, shared by the query heads of a GQA group).
  void (*weighted_rows)(const float* weights, int64_t ldw, int64_t n_out, const float* rows,
                        int64_t ldr, int64_t n_rows, int64_t dim, float* out);
};

const DenseKernels& portable_dense_kernels();
// nullptr when the build has no AVX2 code (not x86-64).
const DenseKernels* avx2_dense_kernels();
// The kernels of active_kernel_path().
const DenseKernels& active_dense_kernels();

// Activations of one token block are kept under this many bytes so they stay
// in L2 while every weight row of a thread's range streams past them once.
constexpr int64_t kTokenBlockBytes = 128 * 1024;

// Walks [row_begin, row_end) x [0, n_tokens) in tiles and calls
// Tiles::tile<F, R, T>, which computes R rows x T tokens. Decode (one token)
// takes 4 rows at a time: 4 rows x 2 accumulators keep 8 FMA chains in
// flight. Batches take 2 rows x 2 tokens, so every weight load feeds two
// tokens and every activation load two rows, with the same 8 chains.
template <class Tiles, TensorFormat F>
void drive_tiles(const RowsRef& w, int64_t row_begin, int64_t row_end, const float* x, int64_t ldx,
                 int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t stride = w.row_stride, cols = w.cols;
  auto row = [&](int64_t r) { return w.data + r * stride; };
  if (n_tokens == 1) {
    int64_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) Tiles::template tile<F, 4, 1>(row(r), stride, x, ldx, cols, y + r, ldy);
    for (; r < row_end; ++r) Tiles::template tile<F, 1, 1>(row(r), stride, x, ldx, cols, y + r, ldy);
    return;
  }
  int64_t block = std::max<int64_t>(2, kTokenBlockBytes / std::max<int64_t>(1, cols * 4)) & ~int64_t{1};
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    int64_t t_end = std::min(n_tokens, t0 + block);
    for (int64_t r = row_begin; r < row_end; r += 2) {
      bool two_rows = r + 2 <= row_end;
      for (int64_t t = t0; t < t_end; t += 2) {
        const float* xt = x + t * ldx;
        float* yt = y + t * ldy + r;
        bool two_tokens = t + 2 <= t_end;
        if (two_rows && two_tokens) Tiles::template tile<F, 2, 2>(row(r), stride, xt, ldx, cols, yt, ldy);
        else if (two_rows) Tiles::template tile<F, 2, 1>(row(r), stride, xt, ldx, cols, yt, ldy);
        else if (two_tokens) Tiles::template tile<F, 1, 2>(row(r), stride, xt, ldx, cols, yt, ldy);
        else Tiles::template tile<F, 1, 1>(row(r), stride, xt, ldx, cols, yt, ldy);
      }
    }
  }
}

// Picks the instantiation for the weight format. Block-quantized formats
// never reach here: matvec.cpp sends them to quant_kernels.h.
template <class Tiles>
void gemm_rows_dispatch(const RowsRef& w, int64_t row_begin, int64_t row_end, const float* x,
                        int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  switch (w.format) {
    case TensorFormat::F32:
      return drive_tiles<Tiles, TensorFormat::F32>(w, row_begin, row_end, x, ldx, n_tokens, y, ldy);
    case TensorFormat::BF16:
      return drive_tiles<Tiles, TensorFormat::BF16>(w, row_begin, row_end, x, ldx, n_tokens, y, ldy);
    case TensorFormat::F16:
      return drive_tiles<Tiles, TensorFormat::F16>(w, row_begin, row_end, x, ldx, n_tokens, y, ldy);
    default: fail("dense kernels: unsupported weight format '{}'", format_name(w.format));
  }
}

}  // namespace tern::detail
