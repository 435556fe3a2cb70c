#pragma once
// TensorFormat — how a tensor's elements are encoded in a .tern file: plain
// element types and the GGUF/ggml block-quantized formats, each with its block
// geometry, so the container, quant/ and the kernels agree on sizes from one
// table. Block layouts and (de)quantization live in tern/quant/.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tern/core/dtype.h"

namespace tern {

// Values index the format table: append new formats, never reorder.
enum class TensorFormat : uint8_t {
  F32,
  F16,
  BF16,
  U8,
  I8,
  Q8_0,   // 32 elements: f16 scale + 32 x int8                       (34 bytes)
  Q4_0,   // 32 elements: f16 scale + 16 bytes of 4-bit codes          (18 bytes)
  Q4_K,   // 256 elements: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of codes (144)
  Q6_K,   // 256 elements: 128 bytes low nibbles, 64 bytes high bits, 16 x int8 scales, f16 d (210)
  MXFP4,  // 32 elements: E8M0 exponent + 16 bytes of E2M1 codes       (17 bytes)
};

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

// Whether the format stores blocks of several elements (Q8_0, Q4_K, ...).
bool is_block_format(TensorFormat format);

// Whether `convert_elements` can turn `from` into `to`.
bool can_convert(TensorFormat from, TensorFormat to);
// Converts n elements between float formats (f32, f16, bf16; identity for
// any format, where n must then be a whole number of blocks). Throws for pairs
// can_convert rejects. Quantizing to a block format is tern/quant's job.
void convert_elements(const void* src, TensorFormat from, void* dst, TensorFormat to, size_t n);

}  // namespace tern
