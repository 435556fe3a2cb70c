#pragma once
// Portable scalar dot products of one quantized weight row with an activation
// vector: the reference the SIMD kernels (kernels/) are tested against. Plain
// loops, no allocation, fixed and documented summation order.
//
// Integer path (what ggml's CPU backend computes): the activation row is
// quantized to 8 bits first, with quantize_activation:
//   Q8_0, Q4_0, MXFP4 weights -> Q8_0 activations (blocks of 32)
//   Q4_K, Q6_K weights        -> Q8_K activations (blocks of 256)
// then, block by block in row order, an exact int32 sum of code products is
// scaled into one float accumulator `acc` (starting at 0):
//   Q8_0  acc += float(isum) * (d_w * d_a)          isum = sum_j qw_j qa_j
//   Q4_0  acc += float(isum) * d_w * d_a  (left to right), qw_j = code_j - 8
//   MXFP4 acc += (d_a * 2^(e-128)) * float(isum),   qw_j = kMxfp4Values[code_j]
//   Q4_K  acc += (d_w * d_a) * float(isum);  acc -= (dmin_w * d_a) * float(imin)
//         isum = sum_s sc_s * sum_{j in s} code_j qa_j,  imin = sum_s m_s * (sum_{j in s} qa_j)
//         (the activation sums come from Q8_K bsums)
//   Q6_K  acc += (d_w * d_a) * float(isum),  isum = sum_s scale_s * sum_{j in s} (code_j - 32) qa_j
// d_w, dmin_w: the weight block's f16 scales as float; d_a: the activation
// block's scale (f16 for Q8_0, f32 for Q8_K). The Q8_0 / Q4_0 / MXFP4 forms
// are exactly ggml's ggml_vec_dot_*_q8_0_generic; ggml's generic Q4_K / Q6_K
// split isum into 8 lanes (by element index mod 8) and add the lane floats
// at the end, which differs from the single accumulator here only by float
// rounding. Integer sums cannot overflow (|isum| < 2^28 for every format).
//
// Float path (vec_dot_*_f32): each block is dequantized exactly as
// dequantize_row_* does, then acc = fma(w_j, x_j, acc) over j in row order,
// one float accumulator for the whole row.
#include <cstdint>

#include "tern/core/tensor_format.h"
#include "tern/quant/blocks.h"

namespace tern {

// Weight-row dots with an activation row already quantized (n elements;
// w: n / block weight blocks; act: n / 32 BlockQ8_0 or n / 256 BlockQ8K).
float vec_dot_q8_0_q8(int64_t n, const void* w_blocks, const void* act_blocks);
float vec_dot_q4_0_q8(int64_t n, const void* w_blocks, const void* act_blocks);
float vec_dot_mxfp4_q8(int64_t n, const void* w_blocks, const void* act_blocks);
float vec_dot_q4_k_q8(int64_t n, const void* w_blocks, const void* act_blocks);
float vec_dot_q6_k_q8(int64_t n, const void* w_blocks, const void* act_blocks);

// Weight-row dots with float activations x[n].
float vec_dot_q8_0_f32(int64_t n, const void* w_blocks, const float* x);
float vec_dot_q4_0_f32(int64_t n, const void* w_blocks, const float* x);
float vec_dot_mxfp4_f32(int64_t n, const void* w_blocks, const float* x);
float vec_dot_q4_k_f32(int64_t n, const void* w_blocks, const float* x);
float vec_dot_q6_k_f32(int64_t n, const void* w_blocks, const float* x);

// The activation block format the integer path pairs with a weight format:
// Q8_0 for Q8_0 / Q4_0 / MXFP4, Q8_K for Q4_K / Q6_K. Throws for other formats.
enum class ActivationFormat : uint8_t { Q8_0, Q8_K };
ActivationFormat activation_format(TensorFormat weight_format);
// Bytes of a quantized activation row of n elements for that weight format.
int64_t activation_bytes(TensorFormat weight_format, int64_t n);
// Quantizes x[n] into `act` (activation_bytes long) for that weight format.
void quantize_activation(TensorFormat weight_format, const float* x, void* act, int64_t n);

// Dispatchers over the quantized weight formats (throw for the others).
float vec_dot_q8(TensorFormat weight_format, int64_t n, const void* w_blocks,
                 const void* act_blocks);
float vec_dot_f32(TensorFormat weight_format, int64_t n, const void* w_blocks, const float* x);

}  // namespace tern
