#pragma once
// Internal to kernels/: matvec/matmul with block-quantized weights (Q8_0,
// Q4_0, Q4_K, Q6_K, MXFP4), float activations in, float out.
//
// As ggml's CPU backend does, each token's activation row is quantized ONCE
// per call to 8-bit blocks (quant/vec_dot.h: Q8_0 blocks for Q8_0 / Q4_0 /
// MXFP4 weights, Q8_K for Q4_K / Q6_K), then every weight row is dotted with
// it block by block: an exact integer sum per block, scaled into one float
// accumulator per (row, token) in block order.
//
// Summation order: exactly that of quant's portable vec_dot_<fmt>_q8 (one
// float accumulator, blocks in row order, the float operations of each block
// in the order vec_dot.h documents, never fused). Integer block sums are
// exact whatever order SIMD adds them in, so the AVX2 path gives the same
// bits as the portable path (which IS vec_dot_*_q8), for any thread count
// and whether a token is computed alone (matvec) or in a batch (matmul).
// AVX2 keeps 8 rows in the 8 lanes of one register: lane r accumulates row r
// with the scalar reference's operations; AVX-512 does the same with 16 rows
// for batches and 8 rows (ymm) for a lone token (quant_avx512.cpp: VNNI, no
// horizontal reduction per block).
#include <cstdint>

#include "tern/core/tensor_format.h"
#include "tern/kernels/dense_kernels.h"  // RowsRef

namespace tern::detail {

// A batch of activation rows quantized for one weight format. Token t's
// blocks (BlockQ8_0 or BlockQ8K, byte-identical to quant's
// quantize_activation) start at blocks + t * row_bytes. For Q8_0 activations
// scales[t * blocks_per_row + b] is block b's f16 scale as float and
// sums[...] the sum of its 32 codes (the AVX2 kernels read them instead of
// decoding the block; unused, left unset, for Q8_K). Points into a buffer
// owned by the caller (matvec.cpp keeps one per thread).
struct QuantActs {
  uint8_t* blocks = nullptr;
  int64_t row_bytes = 0;
  float* scales = nullptr;
  int32_t* sums = nullptr;
  int64_t blocks_per_row = 0;
};

// Bytes a QuantActs of n_tokens rows of `cols` needs (throws tern::Error if
// cols is not a multiple of the activation block size), and its layout in a
// buffer of that size, 32-byte aligned if `buffer` is.
int64_t quant_acts_bytes(TensorFormat weight_format, int64_t cols, int64_t n_tokens);
QuantActs quant_acts_layout(TensorFormat weight_format, int64_t cols, int64_t n_tokens, void* buffer);

struct QuantKernels {
  // Quantizes x[cols] into token t of acts (blocks, and scales/sums for Q8_0).
  // Both paths write identical bytes for finite x (NaN inputs: see
  // quant_avx2_acts.cpp).
  void (*quantize)(TensorFormat weight_format, const float* x, int64_t cols, const QuantActs& acts,
                   int64_t t);
  // y[t * ldy + r] = dot(row r, activations of token t) for r in
  // [row_begin, row_end), t in [0, n_tokens), in the order described above.
  void (*gemm_rows)(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts,
                    int64_t n_tokens, float* y, int64_t ldy);
};

const QuantKernels& portable_quant_kernels();
// nullptr when the build has no AVX2 / AVX-512 code (not x86-64).
const QuantKernels* avx2_quant_kernels();
const QuantKernels* avx512_quant_kernels();
// The kernels of active_kernel_path().
const QuantKernels& active_quant_kernels();

// The AVX2 and AVX-512 paths' quantize (quant_avx2_acts.cpp; x86-64 builds only).
void quantize_acts_avx2(TensorFormat weight_format, const float* x, int64_t cols,
                        const QuantActs& acts, int64_t t);

// Rows are given to threads in groups of this many: the widest tile, one
// register lane per row (AVX-512: 16 rows; AVX2 tiles of 8 divide it), so a
// split never leaves a thread a ragged tile in the middle of the matrix.
constexpr int64_t kQuantRowGroup = 16;

}  // namespace tern::detail
