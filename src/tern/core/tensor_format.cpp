#include "tern/core/tensor_format.h"

#include <array>
#include <cstring>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

// Block geometry of the quantized formats is ggml's (ggml-common.h); the
// layouts themselves are in tern/quant/blocks.h, which static_asserts these
// sizes.
constexpr std::array<TensorFormatInfo, 10> kFormats = {{
    {TensorFormat::F32, "f32", 1, 4},
    {TensorFormat::F16, "f16", 1, 2},
    {TensorFormat::BF16, "bf16", 1, 2},
    {TensorFormat::U8, "u8", 1, 1},
    {TensorFormat::I8, "i8", 1, 1},
    {TensorFormat::Q8_0, "q8_0", 32, 34},
    {TensorFormat::Q4_0, "q4_0", 32, 18},
    {TensorFormat::Q4_K, "q4_k", 256, 144},
    {TensorFormat::Q6_K, "q6_k", 256, 210},
    {TensorFormat::MXFP4, "mxfp4", 32, 17},
}};

constexpr bool table_matches_enum() {
  for (size_t i = 0; i < kFormats.size(); ++i)
    if (static_cast<size_t>(kFormats[i].format) != i) return false;
  return true;
}
static_assert(table_matches_enum(), "kFormats must be indexed by TensorFormat");

}  // namespace

const TensorFormatInfo& format_info(TensorFormat format) {
  const auto i = static_cast<size_t>(format);
  if (i >= kFormats.size()) fail("invalid tensor format value {}", i);
  return kFormats[i];
}

bool is_block_format(TensorFormat format) { return format_info(format).block_elements > 1; }

std::string_view format_name(TensorFormat format) { return format_info(format).name; }

TensorFormat parse_tensor_format(std::string_view name) {
  std::string known;
  for (const auto& f : kFormats) {
    if (f.name == name) return f.format;
    known += known.empty() ? "" : ", ";
    known += f.name;
  }
  fail("unknown tensor format '{}'; known: {}", printable(name), known);
}

TensorFormat format_for_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return TensorFormat::F32;
    case DType::F16: return TensorFormat::F16;
    case DType::BF16: return TensorFormat::BF16;
    case DType::U8: return TensorFormat::U8;
    case DType::I8: return TensorFormat::I8;
    default: fail("dtype {} has no tensor format in Tern", dtype_name(dtype));
  }
}

uint64_t format_bytes(TensorFormat format, const std::vector<int64_t>& shape) {
  const auto& info = format_info(format);
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("negative dimension in shape");
    n = checked_mul(n, static_cast<uint64_t>(d), "tensor size");
  }
  if (info.block_elements > 1) {
    uint64_t row = shape.empty() ? 1 : static_cast<uint64_t>(shape.back());
    if (row % info.block_elements != 0)
      fail("row length {} is not a multiple of the {} block size {}", row, info.name,
           info.block_elements);
  }
  return checked_mul(n / info.block_elements, info.block_bytes, "tensor size");
}

namespace {

bool is_float(TensorFormat f) {
  return f == TensorFormat::F32 || f == TensorFormat::F16 || f == TensorFormat::BF16;
}

float load_float(const void* src, TensorFormat f, size_t i) {
  switch (f) {
    case TensorFormat::F32: return static_cast<const float*>(src)[i];
    case TensorFormat::F16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    default: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  }
}

}  // namespace

bool can_convert(TensorFormat from, TensorFormat to) {
  return from == to || (is_float(from) && is_float(to));
}

void convert_elements(const void* src, TensorFormat from, void* dst, TensorFormat to, size_t n) {
  if (from == to) {
    const auto& info = format_info(from);
    if (n % info.block_elements != 0)
      fail("cannot copy {} elements of {}: not a multiple of the block size {}", n, info.name,
           info.block_elements);
    std::memcpy(dst, src, n / info.block_elements * info.block_bytes);
    return;
  }
  if (!can_convert(from, to)) fail("cannot convert {} to {}", format_name(from), format_name(to));
  // The conversions install runs on every weight, as loops the compiler
  // vectorises (same results as bf16_to_f32 / f32_to_bf16).
  if (from == TensorFormat::BF16 && to == TensorFormat::F32) {
    const auto* in = static_cast<const uint16_t*>(src);
    auto* out = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
      std::memcpy(out + 4 * i, &bits, 4);
    }
    return;
  }
  if (from == TensorFormat::F32 && to == TensorFormat::BF16) {
    const auto* in = static_cast<const unsigned char*>(src);
    auto* out = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, in + 4 * i, 4);
      const uint32_t nan = static_cast<uint32_t>((bits & 0x7fffffffu) > 0x7f800000u);
      const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
      out[i] = static_cast<uint16_t>(nan ? ((bits >> 16) | 0x40u) : rounded);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float v = load_float(src, from, i);
    switch (to) {
      case TensorFormat::F32: static_cast<float*>(dst)[i] = v; break;
      case TensorFormat::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      default: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
    }
  }
}

}  // namespace tern
