#pragma once
// Helpers shared by the kernel tests: random data, weights encoded in a
// format together with their exact float values, and the kernel paths this
// machine can run.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/tensor_format.h"
#include "tern/core/kernel_path.h"
#include "tern/kernels/weight_view.h"

namespace tern::testing {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A weight matrix stored in `format` plus the exact float value of every
// stored element (what a float64 reference must use).
struct TestWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [rows, cols], decoded
  WeightView view;
};

inline TestWeights make_weights(TensorFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeights w;
  std::vector<float> raw = random_floats(rows * cols, seed);
  size_t n = raw.size();
  w.values.resize(n);
  if (format == TensorFormat::F32) {
    w.bytes.resize(n * 4 + 1);  // +1: data() is never null, even for 0 elements
    std::memcpy(w.bytes.data(), raw.data(), n * 4);
    w.values = raw;
  } else {
    w.bytes.resize(n * 2 + 1);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = format == TensorFormat::BF16 ? f32_to_bf16(raw[i]) : f32_to_f16(raw[i]);
      std::memcpy(w.bytes.data() + i * 2, &h, 2);
      w.values[i] = format == TensorFormat::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  w.view = WeightView{w.bytes.data(), format, rows, cols};
  return w;
}

inline std::vector<KernelPath> supported_paths() {
  std::vector<KernelPath> paths{KernelPath::Portable};
  if (kernel_path_supported(KernelPath::Avx2)) paths.push_back(KernelPath::Avx2);
  if (kernel_path_supported(KernelPath::Avx512)) paths.push_back(KernelPath::Avx512);
  return paths;
}

// The SIMD paths this machine can run (each is compared with the portable one).
inline std::vector<KernelPath> simd_paths() {
  std::vector<KernelPath> paths = supported_paths();
  paths.erase(paths.begin());  // Portable
  return paths;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Worst-case bound of the error of a float dot product of n terms in the
// 16-lane order, relative to sum |a_i||b_i|: each lane adds ceil(n/16)
// rounded products, the fold adds 4 levels; one unit roundoff per level plus
// one for the product (Higham, gamma_k), with 10% slack.
inline double dot_error_bound(int64_t n, double abs_sum) {
  double levels = std::ceil(static_cast<double>(n) / 16.0) + 4 + 1;
  return 1.1 * levels * std::ldexp(1.0, -24) * abs_sum + 1e-30;
}

}  // namespace tern::testing
