#pragma once
// WeightView — a borrowed, row-major weight matrix [rows, cols] in PyTorch
// nn.Linear layout (y = W x, W is [out, in]), stored in one TensorFormat.
// Rows are contiguous and each row is encoded independently, so a block-
// quantized format (added with the quant layer) fits as long as its blocks
// tile a row. The view owns nothing; the bytes belong to the trunk buffer or
// the expert cache.
#include <cstdint>

#include "tern/core/tensor_format.h"

namespace tern {

struct WeightView {
  const void* data = nullptr;
  TensorFormat format = TensorFormat::F32;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs
};

// Whether matvec/matmul/dequantize_row accept this format.
bool weight_format_supported(TensorFormat format);

// Bytes of one row, for any TensorFormat (block formats: whole blocks; throws
// if cols is not a multiple of the block size).
int64_t weight_row_bytes(const WeightView& w);

// Rows [begin, begin + count) as their own view (e.g. the gate half of a
// fused gate_up projection). Throws if the range is out of bounds.
WeightView weight_rows(const WeightView& w, int64_t begin, int64_t count);

// Throws tern::Error naming `what` if the view is malformed: negative
// dimensions, a null pointer with a non-empty shape, an unsupported format,
// or (block formats) cols not a multiple of the block size.
void check_weight_view(const WeightView& w, const char* what);

// Decodes row `row` to cols floats. Exact for F32/BF16/F16 (every value is
// representable in float); block formats decode as quant's dequantize_row
// (bit-identical to ggml's), e.g. for embeddings stored as Q8_0.
void dequantize_row(const WeightView& w, int64_t row, float* out);

}  // namespace tern
