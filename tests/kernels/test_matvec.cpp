// matvec / matmul against float64 references, against each other, across
// kernel paths and thread counts.
#include "tern/kernels/matvec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "kernels/kernel_test_util.h"
#include "support/expect_error.h"
#include "tern/core/dtype.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/ops.h"

namespace tern {
namespace {

using testing::make_weights;
using testing::random_floats;
using testing::same_bits;
using testing::supported_paths;
using testing::TestWeights;

const int64_t kCols[] = {1, 7, 8, 15, 16, 17, 33, 100, 771};
const int64_t kRows[] = {1, 5, 64};
const TensorFormat kFormats[] = {TensorFormat::F32, TensorFormat::BF16, TensorFormat::F16};

// Checks y against a float64 product of the exact stored weights, within the
// worst-case rounding bound of the 16-lane order.
void expect_matches_float64(const TestWeights& w, const float* x, const float* y) {
  const int64_t rows = w.view.rows, cols = w.view.cols;
  for (int64_t r = 0; r < rows; ++r) {
    double ref = 0, abs_sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double p = static_cast<double>(w.values[static_cast<size_t>(r * cols + c)]) * x[c];
      ref += p;
      abs_sum += std::fabs(p);
    }
    ASSERT_NEAR(y[r], ref, testing::dot_error_bound(cols, abs_sum))
        << format_name(w.view.format) << " [" << rows << ", " << cols << "] row " << r;
  }
}

TEST(Kernels, MatvecMatchesFloat64ReferenceForEveryFormatAndPath) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : kFormats)
      for (int64_t rows : kRows)
        for (int64_t cols : kCols) {
          TestWeights w = make_weights(format, rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
          auto x = random_floats(cols, 7);
          std::vector<float> y(static_cast<size_t>(rows), -1.0f);
          matvec(w.view, x.data(), y.data(), nullptr);
          SCOPED_TRACE(std::string(kernel_path_name(path)));
          expect_matches_float64(w, x.data(), y.data());
        }
  }
}

TEST(Kernels, MatmulMatchesFloat64Reference) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : kFormats) {
      const int64_t rows = 5, cols = 771, n = 3;
      TestWeights w = make_weights(format, rows, cols, 11);
      auto X = random_floats(n * cols, 12);
      std::vector<float> Y(static_cast<size_t>(n * rows));
      matmul(w.view, X.data(), n, Y.data(), nullptr);
      for (int64_t t = 0; t < n; ++t) expect_matches_float64(w, X.data() + t * cols, Y.data() + t * rows);
    }
  }
}

// The documented summation order, emulated one rounding at a time: `fused`
// selects the SIMD form (fma, zero-padded tail; the AVX-512 path runs the
// AVX2 dense kernels) over the portable form
// (rounded product, then add; tail lanes untouched).
float emulate_dot(const float* w, const float* x, int64_t n, bool fused) {
  float lane[16] = {};
  int64_t padded = fused ? (n + 7) / 8 * 8 : n;
  for (int64_t j = 0; j < padded; ++j) {
    float a = j < n ? w[j] : 0.0f, b = j < n ? x[j] : 0.0f;
    if (fused) {
      lane[j % 16] = std::fmaf(a, b, lane[j % 16]);
    } else {
      volatile float p = a * b;  // volatile: no contraction into an fma
      lane[j % 16] = lane[j % 16] + p;
    }
  }
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = lane[l] + lane[l + 8];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

TEST(Kernels, MatvecFollowsTheDocumentedSummationOrderExactly) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : kFormats)
      for (int64_t cols : kCols) {
        const int64_t rows = 6;
        TestWeights w = make_weights(format, rows, cols, static_cast<uint32_t>(cols));
        auto x = random_floats(cols, 99);
        std::vector<float> y(rows);
        matvec(w.view, x.data(), y.data(), nullptr);
        for (int64_t r = 0; r < rows; ++r) {
          float want = emulate_dot(w.values.data() + r * cols, x.data(), cols, path != KernelPath::Portable);
          EXPECT_EQ(std::bit_cast<uint32_t>(y[r]), std::bit_cast<uint32_t>(want))
              << kernel_path_name(path) << " " << format_name(format) << " cols " << cols << " row " << r;
        }
      }
  }
}

TEST(Kernels, SimdMatvecAgreesWithPortableWithinRounding) {
  if (!kernel_path_supported(KernelPath::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (TensorFormat format : kFormats) {
    const int64_t rows = 64, cols = 771;
    TestWeights w = make_weights(format, rows, cols, 5);
    auto x = random_floats(cols, 6);
    std::vector<float> simd(rows), portable(rows);
    {
      ScopedKernelPath scoped(KernelPath::Avx2);
      matvec(w.view, x.data(), simd.data(), nullptr);
    }
    {
      ScopedKernelPath scoped(KernelPath::Portable);
      matvec(w.view, x.data(), portable.data(), nullptr);
    }
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0;
      for (int64_t c = 0; c < cols; ++c) abs_sum += std::fabs(w.values[r * cols + c] * x[c]);
      // Each is within the bound of the exact value, so within twice of each other.
      EXPECT_NEAR(simd[r], portable[r], 2 * testing::dot_error_bound(cols, abs_sum));
    }
  }
}

TEST(Kernels, MatvecIsBitIdenticalForOneTwoAndThreeThreads) {
  ThreadPool pool2(2), pool3(3);
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : kFormats) {
      // 1001 rows of 771 columns: many chunks, ragged last row group.
      TestWeights w = make_weights(format, 1001, 771, 21);
      auto x = random_floats(771, 22);
      std::vector<float> y1(1001), y2(1001), y3(1001);
      matvec(w.view, x.data(), y1.data(), nullptr);
      matvec(w.view, x.data(), y2.data(), &pool2);
      matvec(w.view, x.data(), y3.data(), &pool3);
      EXPECT_TRUE(same_bits(y1, y2)) << kernel_path_name(path) << " " << format_name(format);
      EXPECT_TRUE(same_bits(y1, y3)) << kernel_path_name(path) << " " << format_name(format);
    }
  }
}

TEST(Kernels, MatmulEqualsRepeatedMatvecBitForBit) {
  ThreadPool pool(3);
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : kFormats)
      for (int64_t cols : {int64_t{7}, int64_t{33}, int64_t{771}, int64_t{4099}})
        // 45 tokens of 771 columns cross a token-block boundary (42 tokens).
        for (int64_t n : {2, 3, 5, 45}) {
          const int64_t rows = 37;
          TestWeights w = make_weights(format, rows, cols, static_cast<uint32_t>(cols + n));
          auto X = random_floats(n * cols, 3);
          std::vector<float> batched(static_cast<size_t>(n * rows)), single(batched.size());
          matmul(w.view, X.data(), n, batched.data(), &pool);
          for (int64_t t = 0; t < n; ++t) matvec(w.view, X.data() + t * cols, single.data() + t * rows, nullptr);
          EXPECT_TRUE(same_bits(batched, single))
              << kernel_path_name(path) << " " << format_name(format) << " cols " << cols << " n " << n;
        }
  }
}

TEST(Kernels, MatmulIsBitIdenticalForOneTwoAndThreeThreads) {
  ThreadPool pool2(2), pool3(3);
  TestWeights w = make_weights(TensorFormat::BF16, 203, 100, 8);
  auto X = random_floats(9 * 100, 9);
  std::vector<float> y1(9 * 203), y2(y1.size()), y3(y1.size());
  matmul(w.view, X.data(), 9, y1.data(), nullptr);
  matmul(w.view, X.data(), 9, y2.data(), &pool2);
  matmul(w.view, X.data(), 9, y3.data(), &pool3);
  EXPECT_TRUE(same_bits(y1, y2));
  EXPECT_TRUE(same_bits(y1, y3));
}

TEST(Kernels, DotEqualsMatvecRowWithF32Weights) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    TestWeights w = make_weights(TensorFormat::F32, 3, 771, 4);
    auto x = random_floats(771, 5);
    std::vector<float> y(3);
    matvec(w.view, x.data(), y.data(), nullptr);
    for (int64_t r = 0; r < 3; ++r)
      EXPECT_EQ(std::bit_cast<uint32_t>(dot(w.values.data() + r * 771, x.data(), 771)),
                std::bit_cast<uint32_t>(y[r]));
  }
}

TEST(Kernels, EmptyShapesAreNoOps) {
  TestWeights w = make_weights(TensorFormat::BF16, 4, 0, 1);
  std::vector<float> y(4, 5.0f);
  matvec(w.view, nullptr, y.data(), nullptr);  // zero columns: every dot is +0
  for (float v : y) EXPECT_EQ(v, 0.0f);
  matmul(w.view, nullptr, 0, nullptr, nullptr);
}

TEST(Kernels, MatvecRejectsUnsupportedFormatAndBadShape) {
  uint8_t bytes[16] = {};
  float x[4] = {}, y[4] = {};
  testing::expect_error([&] { matvec(WeightView{bytes, TensorFormat::U8, 4, 4}, x, y, nullptr); },
                        {"matvec", "u8"});
  testing::expect_error([&] { matvec(WeightView{bytes, TensorFormat::F32, -1, 4}, x, y, nullptr); },
                        {"matvec", "negative"});
  testing::expect_error([&] { matvec(WeightView{nullptr, TensorFormat::F32, 1, 4}, x, y, nullptr); },
                        {"matvec", "null"});
}

TEST(Kernels, DequantizeRowIsExactForEvery16BitValue) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> out(all.size());
  for (TensorFormat format : {TensorFormat::BF16, TensorFormat::F16}) {
    dequantize_row(WeightView{all.data(), format, 1, 65536}, 0, out.data());
    for (size_t i = 0; i < all.size(); ++i) {
      float want = format == TensorFormat::BF16 ? bf16_to_f32(all[i]) : f16_to_f32(all[i]);
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
          << format_name(format) << " 0x" << std::hex << i;
    }
  }
}

TEST(Kernels, DequantizeRowReturnsTheStoredRow) {
  for (TensorFormat format : kFormats) {
    TestWeights w = make_weights(format, 5, 33, 2);
    std::vector<float> out(33);
    dequantize_row(w.view, 3, out.data());
    for (int c = 0; c < 33; ++c) EXPECT_EQ(out[c], w.values[3 * 33 + c]);
    testing::expect_error([&] { dequantize_row(w.view, 5, out.data()); }, {"row 5"});
  }
}

TEST(Kernels, WeightRowsSelectsASubMatrix) {
  TestWeights w = make_weights(TensorFormat::BF16, 10, 7, 3);
  WeightView sub = weight_rows(w.view, 4, 3);
  EXPECT_EQ(sub.rows, 3);
  auto x = random_floats(7, 1);
  std::vector<float> full(10), part(3);
  matvec(w.view, x.data(), full.data(), nullptr);
  matvec(sub, x.data(), part.data(), nullptr);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(part[r], full[4 + r]);
  EXPECT_THROW(weight_rows(w.view, 8, 3), Error);
}

TEST(Kernels, PortablePathCanBeForced) {
  {
    ScopedKernelPath scoped(KernelPath::Portable);
    EXPECT_EQ(active_kernel_path(), KernelPath::Portable);
  }
  EXPECT_TRUE(kernel_path_supported(KernelPath::Portable));
  EXPECT_EQ(kernel_path_name(KernelPath::Portable), "portable");
}

}  // namespace
}  // namespace tern
