// The SIMD quantizers (quant/quantize_x86.cpp: AVX2 Q8_0 and Q4_K, AVX-512
// Q4_K) write exactly the bytes of the portable ones
// (tests/reference/test_gguf_quants.py pins those against NumPy): random rows
// over many magnitudes, and the edge cases each SIMD trick must survive:
// constant and zero sub-blocks, positive-only data, NaN, infinities,
// subnormal and huge values, rows whose super-block count is no multiple of
// the group the SIMD code fits at once (2 with AVX2, 8 with AVX-512).
#include "tern/quant/quant_internal.h"  // first (declares the per-path quantizers)

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "tern/core/kernel_path.h"

namespace tern {
namespace {

using Quantizer = void (*)(const float*, void*, int64_t);

struct Format {
  const char* name;
  Quantizer portable, simd;
  KernelPath path;  // the CPU support `simd` needs
  int64_t block_elements, block_bytes;
};

const Format kSimdFormats[] = {
    {"q8_0", quant_detail::quantize_row_q8_0_portable, quant_detail::quantize_row_q8_0_avx2, KernelPath::Avx2, 32,
     34},
    {"q4_k", quant_detail::quantize_row_q4_k_portable, quant_detail::quantize_row_q4_k_avx2, KernelPath::Avx2, 256,
     144},
    {"q4_k avx512", quant_detail::quantize_row_q4_k_portable, quant_detail::quantize_row_q4_k_avx512,
     KernelPath::Avx512, 256, 144},
};

// Rows of n elements: Gaussian at many scales, with edge cases mixed in.
std::vector<std::vector<float>> test_rows(int64_t n) {
  std::vector<std::vector<float>> rows;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1e-30f, 1e-6f, 1e-3f, 0.02f, 1.0f, 7.5f, 1e3f, 1e30f}) {
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<float> r(static_cast<size_t>(n));
      for (auto& v : r) v = normal(rng) * scale;
      rows.push_back(r);
      for (auto& v : r) v = std::fabs(v);  // positive only: the fitted min clamps to 0
      rows.push_back(r);
      for (auto& v : r) v = std::round(v / scale * 4.0f);  // values on a coarse grid: ties
      rows.push_back(r);
      // One loud sub-block per 256: the quiet ones' 6-bit Q4_K scales round
      // to 0, so step 3 keeps the codes of their fits.
      for (auto& v : r) v = normal(rng) * scale;
      for (int64_t i = 0; i < n; i += 256)
        for (int64_t k = i + 64; k < i + 96 && k < n; ++k) r[static_cast<size_t>(k)] *= 1000.0f;
      rows.push_back(r);
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, 1.0f, -3.5f, nan, inf, -inf, 1e-40f, -1e-45f, 3e38f, -3e38f};
  for (float special : specials) {
    // Whole row, one block-sized run, and single elements of that value.
    rows.emplace_back(static_cast<size_t>(n), special);
    std::vector<float> r(static_cast<size_t>(n));
    for (auto& v : r) v = normal(rng);
    for (int64_t i = 32; i < 64 && i < n; ++i) r[static_cast<size_t>(i)] = special;
    rows.push_back(r);
    for (auto& v : r) v = normal(rng);
    for (int64_t i = 5; i < n; i += 97) r[static_cast<size_t>(i)] = special;
    rows.push_back(r);
  }
  return rows;
}

TEST(QuantizeSimd, SimdQuantizersWriteThePortableBytes) {
  int formats = 0;
  for (const Format& f : kSimdFormats) {
    if (!kernel_path_supported(f.path)) continue;  // the format's line of the log says so below
    ++formats;
    for (int64_t blocks : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{13}, 2048 / f.block_elements}) {
      const int64_t n = blocks * f.block_elements;
      const auto rows = test_rows(n);
      int compared = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const size_t bytes = static_cast<size_t>(blocks * f.block_bytes);
        std::vector<uint8_t> want(bytes, 0xAA), got(bytes, 0x55);
        f.portable(rows[r].data(), want.data(), n);
        f.simd(rows[r].data(), got.data(), n);
        ASSERT_EQ(want, got) << f.name << ", row " << r << " of " << rows.size() << ", n " << n;
        ++compared;
      }
      EXPECT_GT(compared, 200);
    }
    std::printf("%s: SIMD bytes equal the portable ones\n", f.name);
  }
  if (formats == 0) GTEST_SKIP() << "this CPU has no AVX2";
}

TEST(QuantizeSimd, PublicQuantizerFollowsTheActiveKernelPath) {
  // quantize_row dispatches on the kernel path, so TERN_KERNELS=portable
  // runs (and tests) the portable quantizers end to end.
  EXPECT_EQ(quant_detail::quantize_with_avx2(), active_kernel_path() != KernelPath::Portable);
  {
    ScopedKernelPath portable(KernelPath::Portable);
    EXPECT_FALSE(quant_detail::quantize_with_avx2());
  }
}

}  // namespace
}  // namespace tern
