#pragma once
// Internal to kernels/: exp for softmax and SiLU. glibc's expf is a call per
// element that the compiler cannot vectorize; softmax over a 4096-position
// attention row spent ~25% of attention time in it. This is the Cephes
// single-precision scheme in plain IEEE float operations (no libm, no
// fused multiply-add: see float_mode.h in the including file), so it
// vectorizes and gives identical bits on every path and target.
// Accuracy: within 1 ulp of exp for -87.3 <= x <= 88 (every float checked
// once: worst 0.99 ulp). Inputs above
// 88 return exp(88) (~1.65e38, finite); inputs below -87.3 return 0 (the
// exact value is below FLT_MIN); NaN returns NaN.
#include <cstdint>
#include <cstring>

namespace tern::detail {

// Written as straight-line arithmetic plus selects so loops over it
// vectorize (a branch around a float operation blocks if-conversion).
inline float fast_exp(float input) {
  const float lo = -87.33654f, hi = 88.0f;
  float x = input == input ? input : 0.0f;  // NaN -> 0 keeps float -> int defined
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // n = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer in float.
  const float magic = 12582912.0f;
  const float n = (x * 1.44269504088896341f + magic) - magic;
  // r = x - n ln 2 in two parts; n * 0.693359375 is exact (9 + 8 bits).
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = (p * (r * r) + r) + 1.0f;
  // 2^n for n in [-126, 127]: build the exponent field directly.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  float result = y * scale;
  result = input < lo ? 0.0f : result;
  return input == input ? result : input;
}

}  // namespace tern::detail
