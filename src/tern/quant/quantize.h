#pragma once
// Quantize and dequantize rows of weights in the GGUF/ggml block formats
// (layouts: tern/quant/blocks.h). A "row" is n consecutive elements, n a
// multiple of the format's block size (else tern::Error); blocks are written
// back to back, so a row of n elements takes n / block_elements * block_bytes.
//
// Exactness contract (pinned by tests/reference/test_gguf_quants.py against an
// independent NumPy implementation):
//  - Q8_0, Q4_0, MXFP4, Q8_K: round-to-nearest exactly as ggml's
//    quantize_row_*_ref, byte for byte, including its rounding choices (roundf
//    for Q8_0, the +8.5 truncation for Q4_0, first-nearest code for MXFP4,
//    round-half-even nearest_int for Q8_K) and f32 -> f16 scale conversion with
//    round-to-nearest-even.
//  - Q6_K: ggml's error-minimising scale search (make_qx_quants with
//    rmse_type 1), evaluated in strict IEEE float without fused multiply-add.
//    ggml built with contraction (GCC -ffp-contract=fast on an FMA target) can
//    differ in rare ties.
//  - Q4_K: ggml's search (make_qkx2_quants with the weights av_x + |x|) with
//    14 of its 21 candidates (the even ones, then the best and its
//    neighbours) and each candidate fit's error computed from its sums
//    instead of a second pass over the elements (q4_k.cpp). The bytes are
//    Tern's own (the NumPy reference has this search and ggml's); the error
//    equals ggml's within 0.5% (tests/reference/test_gguf_quants.py).
//  - Where ggml's C is undefined (a block scale whose reciprocal overflows,
//    amax < ~1e-37; NaN or infinite input), Tern saturates codes instead
//    (quant_internal.h) and stays deterministic.
//  - Dequantization is ggml's dequantize_row_* with the same float operation
//    order, so it is bit-identical too.
// No function allocates; all are safe to call concurrently on distinct rows.
#include <cstdint>

#include "tern/core/tensor_format.h"
#include "tern/quant/blocks.h"

namespace tern {

// x: n floats; blocks: n / 32 BlockQ8_0.
void quantize_row_q8_0(const float* x, void* blocks, int64_t n);
void dequantize_row_q8_0(const void* blocks, float* y, int64_t n);

// x: n floats; blocks: n / 32 BlockQ4_0.
void quantize_row_q4_0(const float* x, void* blocks, int64_t n);
void dequantize_row_q4_0(const void* blocks, float* y, int64_t n);

// x: n floats; blocks: n / 32 BlockMxfp4.
void quantize_row_mxfp4(const float* x, void* blocks, int64_t n);
void dequantize_row_mxfp4(const void* blocks, float* y, int64_t n);

// x: n floats; blocks: n / 256 BlockQ4K.
void quantize_row_q4_k(const float* x, void* blocks, int64_t n);
void dequantize_row_q4_k(const void* blocks, float* y, int64_t n);

// x: n floats; blocks: n / 256 BlockQ6K.
void quantize_row_q6_k(const float* x, void* blocks, int64_t n);
void dequantize_row_q6_k(const void* blocks, float* y, int64_t n);

// Activations for dot products with Q4_K / Q6_K weights: n / 256 BlockQ8K.
void quantize_row_q8_k(const float* x, void* blocks, int64_t n);
void dequantize_row_q8_k(const void* blocks, float* y, int64_t n);

// Whether the format is block-quantized (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4).
bool is_quantized(TensorFormat format);

// Encodes n floats as `format`: the quantizers above for block formats,
// element conversion (round-to-nearest-even) for F32 / F16 / BF16. Throws for
// U8 / I8 and for a row length that is not a multiple of the block size.
void quantize_row(TensorFormat format, const float* x, void* out, int64_t n);
// Decodes n elements of `format` into floats; same formats as quantize_row.
void dequantize_row(TensorFormat format, const void* in, float* y, int64_t n);

// Bytes of a row of n elements of `format` (throws like quantize_row).
int64_t row_bytes(TensorFormat format, int64_t n);

}  // namespace tern
