#include "tern/core/dtype.h"

#include <array>
#include <cstring>

namespace tern {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::string_view format;
  uint32_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {DType::F64, "F64", "f64", 8},
    {DType::F32, "F32", "f32", 4},
    {DType::F16, "F16", "f16", 2},
    {DType::BF16, "BF16", "bf16", 2},
    {DType::I64, "I64", "i64", 8},
    {DType::I32, "I32", "i32", 4},
    {DType::I16, "I16", "i16", 2},
    {DType::I8, "I8", "i8", 1},
    {DType::U8, "U8", "u8", 1},
    {DType::BOOL, "BOOL", "bool", 1},
    {DType::F8_E4M3, "F8_E4M3", "f8_e4m3", 1},
    {DType::F8_E5M2, "F8_E5M2", "f8_e5m2", 1},
}};

const DTypeInfo& info(DType d) { return kDTypes[static_cast<size_t>(d)]; }

}  // namespace

uint32_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
std::string_view dtype_format_name(DType dtype) { return info(dtype).format; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name || d.format == name) return d.dtype;
  return std::nullopt;
}

float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                              // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // value / 2^-24, the f16 subnormal unit
    uint32_t half_mant = mant >> shift;
    // Round to nearest even.
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  uint32_t h = ((rounded >> 13) - ((127 - 15) << 10));
  return static_cast<uint16_t>(sign | h);
}

}  // namespace tern
