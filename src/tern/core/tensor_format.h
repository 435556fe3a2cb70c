#pragma once
// TensorFormat — how a tensor's elements are encoded in a .tern file: plain
// element types now; block-quantized formats (Q8_0, Q4_K, MXFP4, ...) are
// added here by the quant layer's issue, each with its block geometry, so the
// container and the kernels agree on sizes from one table.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tern/core/dtype.h"

namespace tern {

enum class TensorFormat : uint8_t { F32, F16, BF16, U8, I8 };

struct TensorFormatInfo {
  TensorFormat format;
  std::string_view name;    // manifest / flag spelling: "f32", "bf16", ...
  uint32_t block_elements;  // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
};

const TensorFormatInfo& format_info(TensorFormat format);
std::string_view format_name(TensorFormat format);
// Throws tern::Error listing the known formats.
TensorFormat parse_tensor_format(std::string_view name);
// The format a safetensors dtype is stored as unchanged; throws if none.
TensorFormat format_for_dtype(DType dtype);
// Bytes a tensor of this shape takes; throws if the last dimension is not a
// multiple of the block size (rows are quantized independently).
uint64_t format_bytes(TensorFormat format, const std::vector<int64_t>& shape);

// Whether `convert_elements` can turn `from` into `to`.
bool can_convert(TensorFormat from, TensorFormat to);
// Converts n elements between float formats (f32, f16, bf16; identity for
// any format). Throws for pairs can_convert rejects.
void convert_elements(const void* src, TensorFormat from, void* dst, TensorFormat to, size_t n);

}  // namespace tern
