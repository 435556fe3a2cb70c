#pragma once
// DType — element types of tensors as stored on disk (safetensors dtypes).
// Block-quantized formats (Q8_0, Q4_K, MXFP4, ...) live in quant/ and are
// described by a format name in the .tern manifest, not by this enum.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tern {

enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

// Size of one element in bytes.
uint32_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", ...
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);
// Lower-case format name used in manifests and flags: "f32", "bf16", ...
std::string_view dtype_format_name(DType dtype);

// bfloat16 / float16 conversions (round-to-nearest-even on the way down).
float bf16_to_f32(uint16_t v);
uint16_t f32_to_bf16(float v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float v);

}  // namespace tern
