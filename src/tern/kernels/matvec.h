#pragma once
// Matrix-vector and matrix-matrix products with a weight matrix in any
// supported format; activations are float32. The hot path of decoding.
//
// Determinism: each output element is one dot product in the fixed 16-lane
// order of the active kernel path (kernels/dense_kernels.h). Threads split
// output rows only, so results are bit-identical for any thread count, and
// matmul over n tokens equals n calls of matvec bit for bit.
//
// Block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4): each token's x is
// quantized once per call to 8-bit blocks (quant/vec_dot.h), and each output
// is an integer-per-block dot product in quant's documented order: the result
// is exactly vec_dot_q8(format, cols, row, quantize_activation(x)), on every
// kernel path, for any thread count, matvec or matmul alike. The quantized
// activations live in a per-thread buffer that grows to the largest call.
#include <cstdint>

#include "tern/kernels/weight_view.h"

namespace tern {

class ThreadPool;

// y[r] = dot(W[r, :], x) for r < w.rows. x has w.cols floats, y w.rows floats;
// x and y must not overlap. pool may be null (runs on the calling thread).
// A bias, if any, is added by the caller.
void matvec(const WeightView& w, const float* x, float* y, ThreadPool* pool);

// Y[t, r] = dot(W[r, :], X[t, :]) for a batch of tokens: X is [n_tokens,
// w.cols], Y is [n_tokens, w.rows], both row-major, not overlapping. Each
// weight row is read from memory once per block of tokens (prefill; tokens
// sharing an expert). n_tokens == 1 is exactly matvec.
void matmul(const WeightView& w, const float* X, int64_t n_tokens, float* Y, ThreadPool* pool);

}  // namespace tern
