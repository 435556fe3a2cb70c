// matvec / matmul with block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K,
// MXFP4): against float64 references, against quant's reference dot
// products, across kernel paths, thread counts and batch sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "support/expect_error.h"
#include "tern/core/dtype.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/quant_kernels.h"
#include "tern/kernels/weight_view.h"
#include "tern/quant/quantize.h"
#include "tern/quant/vec_dot.h"

namespace tern {
namespace {

using testing::random_floats;
using testing::same_bits;
using testing::supported_paths;

constexpr TensorFormat kBlockFormats[] = {TensorFormat::Q8_0, TensorFormat::Q4_0, TensorFormat::MXFP4,
                                          TensorFormat::Q4_K, TensorFormat::Q6_K};
// Rows: not multiples of the 8-row tile (1, 3, 17, 67).
constexpr int64_t kQuantRows[] = {1, 3, 17, 67};

// Column counts: whole blocks, but not multiples of 64/128/512 where possible.
std::vector<int64_t> cols_for(TensorFormat f) {
  if (format_info(f).block_elements == 32) return {32 * 3, 32 * 9, 2880};
  return {256, 256 * 3, 256 * 9};
}

std::string label(TensorFormat f, int64_t rows, int64_t cols) {
  return std::string(format_name(f)) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// A quantized weight matrix with its dequantized values.
struct QuantWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [rows, cols], dequantized
  WeightView view;
};

QuantWeights make_quant_weights(TensorFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  QuantWeights w;
  const int64_t rb = row_bytes(format, cols);
  w.bytes.resize(static_cast<size_t>(rb * rows + 1));
  w.values.resize(static_cast<size_t>(rows * cols));
  std::vector<float> raw = random_floats(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(format, raw.data() + r * cols, w.bytes.data() + r * rb, cols);
    dequantize_row(format, w.bytes.data() + r * rb, w.values.data() + r * cols, cols);
  }
  w.view = WeightView{w.bytes.data(), format, rows, cols};
  return w;
}

// Activations of different magnitudes per block, as real hidden states have.
std::vector<float> make_activations(int64_t n, uint32_t seed) {
  std::vector<float> x = random_floats(n, seed);
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] *= 0.25f + static_cast<float>((i / 32) % 5);
  return x;
}

// Quantizes x as the kernels do and decodes it back to floats.
std::vector<float> dequantized_activations(TensorFormat wf, const float* x, int64_t n) {
  std::vector<uint8_t> act(static_cast<size_t>(activation_bytes(wf, n)) + 1);
  quantize_activation(wf, x, act.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  if (activation_format(wf) == ActivationFormat::Q8_0) dequantize_row_q8_0(act.data(), y.data(), n);
  else dequantize_row_q8_k(act.data(), y.data(), n);
  return y;
}

std::vector<float> run_matvec(const WeightView& w, const std::vector<float>& x, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(w.rows), -7.0f);
  matvec(w, x.data(), y.data(), pool);
  return y;
}

std::vector<float> run_matmul(const WeightView& w, const std::vector<float>& X, int64_t n, ThreadPool* pool) {
  std::vector<float> Y(static_cast<size_t>(w.rows * n), -7.0f);
  matmul(w, X.data(), n, Y.data(), pool);
  return Y;
}

// (a) Against the dequantized weights and the ORIGINAL activations. The error
// is dominated by activation quantization: each activation moves by at most
// half a step of its block (step = block max |x| / 127; Q8_0 also rounds its
// scale to f16), so the tolerance allows a full step per element:
//   |y - ref| <= sum_j |w_j| * amax(block of x_j) / 127 + float rounding.
TEST(KernelsQuant, MatvecMatchesFloat64OfDequantizedWeightsWithinActivationQuantizationError) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat f : kBlockFormats)
      for (int64_t rows : kQuantRows)
        for (int64_t cols : cols_for(f)) {
          QuantWeights w = make_quant_weights(f, rows, cols, static_cast<uint32_t>(rows * 131 + cols));
          std::vector<float> x = make_activations(cols, 5);
          std::vector<float> y = run_matvec(w.view, x, nullptr);
          const int64_t ablock = activation_format(f) == ActivationFormat::Q8_0 ? 32 : 256;
          std::vector<double> step(static_cast<size_t>(cols));
          for (int64_t b = 0; b < cols; b += ablock) {
            double amax = 0;
            for (int64_t j = b; j < b + ablock; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
            for (int64_t j = b; j < b + ablock; ++j) step[static_cast<size_t>(j)] = amax / 127.0;
          }
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, abs_sum = 0, tol = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const double wv = w.values[static_cast<size_t>(r * cols + c)];
              ref += wv * x[static_cast<size_t>(c)];
              abs_sum += std::fabs(wv * x[static_cast<size_t>(c)]);
              tol += std::fabs(wv) * step[static_cast<size_t>(c)];
            }
            tol += testing::dot_error_bound(cols, abs_sum) * 4;
            ASSERT_NEAR(y[static_cast<size_t>(r)], ref, tol)
                << label(f, rows, cols) << " row " << r << " " << kernel_path_name(path);
          }
        }
  }
}

// (b) Against the dequantized weights and the dequantized QUANTIZED
// activations: only float rounding remains. The kernel scales exact integer
// block sums (one or two roundings for the scale product, one for the
// product, one per block added); the reference's dequantized weights carry
// their own rounding (Q4_K: d * sc * q - dmin * m). With n_blocks blocks and
// u = 2^-24, the tolerance is
//   (n_blocks + 8) * 2u * sum_j (|w_j| + max |w| of j's weight block) |a_j|.
TEST(KernelsQuant, MatvecMatchesFloat64OfDequantizedWeightsAndActivationsTightly) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat f : kBlockFormats)
      for (int64_t rows : kQuantRows)
        for (int64_t cols : cols_for(f)) {
          QuantWeights w = make_quant_weights(f, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
          std::vector<float> x = make_activations(cols, 9);
          std::vector<float> a = dequantized_activations(f, x.data(), cols);
          std::vector<float> y = run_matvec(w.view, x, nullptr);
          const int64_t wblock = format_info(f).block_elements;
          const double u = std::ldexp(1.0, -24);
          for (int64_t r = 0; r < rows; ++r) {
            const float* wr = w.values.data() + r * cols;
            double ref = 0, mag = 0;
            for (int64_t b = 0; b < cols; b += wblock) {
              double bmax = 0;
              for (int64_t j = b; j < b + wblock; ++j) bmax = std::max(bmax, std::fabs(static_cast<double>(wr[j])));
              for (int64_t j = b; j < b + wblock; ++j) {
                ref += static_cast<double>(wr[j]) * a[static_cast<size_t>(j)];
                mag += (std::fabs(static_cast<double>(wr[j])) + bmax) * std::fabs(static_cast<double>(a[static_cast<size_t>(j)]));
              }
            }
            const double tol = static_cast<double>(cols / wblock + 8) * 2 * u * mag + 1e-30;
            ASSERT_NEAR(y[static_cast<size_t>(r)], ref, tol)
                << label(f, rows, cols) << " row " << r << " " << kernel_path_name(path);
          }
        }
  }
}

// The documented contract: each output is exactly quant's vec_dot_q8 of the
// row with quantize_activation(x), on every path.
TEST(KernelsQuant, MatvecEqualsQuantReferenceDotBitForBitOnEveryPath) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat f : kBlockFormats)
      for (int64_t rows : {int64_t{3}, int64_t{17}})
        for (int64_t cols : cols_for(f)) {
          QuantWeights w = make_quant_weights(f, rows, cols, static_cast<uint32_t>(cols + 1));
          std::vector<float> x = make_activations(cols, 3);
          std::vector<uint8_t> act(static_cast<size_t>(activation_bytes(f, cols)));
          quantize_activation(f, x.data(), act.data(), cols);
          std::vector<float> y = run_matvec(w.view, x, nullptr);
          const int64_t rb = weight_row_bytes(w.view);
          for (int64_t r = 0; r < rows; ++r) {
            const float want = vec_dot_q8(f, cols, w.bytes.data() + r * rb, act.data());
            ASSERT_EQ(std::bit_cast<uint32_t>(y[static_cast<size_t>(r)]), std::bit_cast<uint32_t>(want))
                << label(f, rows, cols) << " row " << r << " " << kernel_path_name(path);
          }
        }
  }
}

TEST(KernelsQuant, SimdPathsMatchPortableBitForBit) {
  if (testing::simd_paths().empty()) GTEST_SKIP() << "no SIMD path on this CPU";
  for (TensorFormat f : kBlockFormats)
    for (int64_t rows : kQuantRows)
      for (int64_t cols : cols_for(f)) {
        QuantWeights w = make_quant_weights(f, rows, cols, static_cast<uint32_t>(rows + cols * 3));
        const int64_t n = 5;
        std::vector<float> X = make_activations(n * cols, 21);
        std::vector<float> portable, portable_mv;
        {
          ScopedKernelPath scoped(KernelPath::Portable);
          portable = run_matmul(w.view, X, n, nullptr);
          portable_mv = run_matvec(w.view, X, nullptr);
        }
        for (KernelPath path : testing::simd_paths()) {
          ScopedKernelPath scoped(path);
          EXPECT_TRUE(same_bits(portable, run_matmul(w.view, X, n, nullptr))) << label(f, rows, cols) << " "
                                                                              << kernel_path_name(path);
          EXPECT_TRUE(same_bits(portable_mv, run_matvec(w.view, X, nullptr))) << label(f, rows, cols) << " "
                                                                               << kernel_path_name(path);
        }
      }
}

// Arbitrary block bytes (every code value, the extreme codes together, random
// sub-block scales and mins, MXFP4 exponents from subnormal to large) and
// activations spanning the whole int8 range: the SIMD integer sums must stay
// exact where quantized real weights never go. Scales are kept finite.
TEST(KernelsQuant, SimdPathsMatchPortableOnArbitraryBlockBytes) {
  if (testing::simd_paths().empty()) GTEST_SKIP() << "no SIMD path on this CPU";
  std::mt19937 rng(11);
  for (TensorFormat f : kBlockFormats) {
    const int64_t rows = 37, cols = format_info(f).block_elements == 32 ? 32 * 7 : 256 * 2, n = 3;
    const int64_t rb = row_bytes(f, cols), block = format_info(f).block_bytes;
    std::vector<uint8_t> bytes(static_cast<size_t>(rb * rows));
    for (auto& v : bytes) v = static_cast<uint8_t>(rng());
    for (int64_t at = 0; at < rb * rows; at += block) {
      uint8_t* blk = bytes.data() + at;
      auto put_f16 = [&](int64_t off) {
        const uint16_t h = f32_to_f16(std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng));
        std::memcpy(blk + off, &h, 2);
      };
      if (at % (block * 3) == 0 && f != TensorFormat::Q6_K && f != TensorFormat::Q4_K) {
        // Extreme codes: Q8_0 -128 / 127, 4-bit codes 0 / 15.
        const int64_t first = f == TensorFormat::MXFP4 ? 1 : 2;
        for (int64_t j = first; j < block; ++j) blk[j] = f == TensorFormat::Q8_0 ? (j % 2 ? 0x80 : 0x7F) : (j % 2 ? 0xFF : 0x00);
      }
      switch (f) {
        case TensorFormat::Q8_0:
        case TensorFormat::Q4_0: put_f16(0); break;
        case TensorFormat::MXFP4: blk[0] = static_cast<uint8_t>(at % 5 == 0 ? rng() % 3 : 100 + rng() % 50); break;
        case TensorFormat::Q4_K: put_f16(0), put_f16(2); break;
        case TensorFormat::Q6_K: put_f16(block - 2); break;
        default: break;
      }
    }
    const WeightView view{bytes.data(), f, rows, cols};
    // Blocks whose largest element sits at either sign give codes -128..127.
    std::vector<float> X = make_activations(n * cols, 8);
    for (int64_t i = 0; i < n * cols; i += 64) X[static_cast<size_t>(i)] = i % 128 ? -1e3f : 1e3f;
    std::vector<float> portable, portable_mv;
    {
      ScopedKernelPath scoped(KernelPath::Portable);
      portable = run_matmul(view, X, n, nullptr);
      portable_mv = run_matvec(view, X, nullptr);
    }
    for (KernelPath path : testing::simd_paths()) {
      ScopedKernelPath scoped(path);
      EXPECT_TRUE(same_bits(portable, run_matmul(view, X, n, nullptr))) << format_name(f) << " " << kernel_path_name(path);
      EXPECT_TRUE(same_bits(portable_mv, run_matvec(view, X, nullptr))) << format_name(f) << " " << kernel_path_name(path);
    }
  }
}

// The row kernels on any row range: ranges that start and end inside a tile
// (8 rows AVX2 and AVX-512 batch 1, 16 rows AVX-512 batches), so ragged
// tiles and the clamped prefetch of later tiles meet every kernel, for a lone
// token (the AVX-512 path's 8-row VNNI kernel) and for a batch.
TEST(KernelsQuant, RowKernelsOnArbitraryRowRangesMatchPortable) {
  const detail::QuantKernels* simd[] = {detail::avx2_quant_kernels(), detail::avx512_quant_kernels()};
  const KernelPath simd_path[] = {KernelPath::Avx2, KernelPath::Avx512};
  for (TensorFormat f : kBlockFormats) {
    const int64_t rows = 91, cols = format_info(f).block_elements == 32 ? 32 * 11 : 256 * 3;
    QuantWeights w = make_quant_weights(f, rows, cols, 5);
    const detail::RowsRef ref{w.bytes.data(), f, row_bytes(f, cols), cols};
    for (int64_t n : {int64_t{1}, int64_t{3}}) {
      std::vector<float> X = make_activations(n * cols, 12);
      std::vector<uint8_t> buf(static_cast<size_t>(detail::quant_acts_bytes(f, cols, n)) + 64);
      const detail::QuantActs acts = detail::quant_acts_layout(f, cols, n, buf.data());
      for (int64_t t = 0; t < n; ++t) detail::portable_quant_kernels().quantize(f, X.data() + t * cols, cols, acts, t);
      for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, rows}, {5, 61}, {3, 4}, {17, 90}, {40, 57}}) {
        std::vector<float> want(static_cast<size_t>(rows * n), -7.0f);
        detail::portable_quant_kernels().gemm_rows(ref, begin, end, acts, n, want.data(), rows);
        for (int i = 0; i < 2; ++i) {
          if (simd[i] == nullptr || !kernel_path_supported(simd_path[i])) continue;
          std::vector<float> got(static_cast<size_t>(rows * n), -7.0f);
          simd[i]->gemm_rows(ref, begin, end, acts, n, got.data(), rows);
          EXPECT_TRUE(same_bits(want, got)) << label(f, rows, cols) << " rows [" << begin << ", " << end << ") tokens "
                                            << n << " " << kernel_path_name(simd_path[i]);
        }
      }
    }
  }
}

// The AVX2 activation quantizer writes the reference's bytes, including
// rounding ties, zero blocks, huge and tiny magnitudes and infinities.
TEST(KernelsQuant, Avx2ActivationQuantizationMatchesReferenceBytes) {
  if (!kernel_path_supported(KernelPath::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t n = 256 * 6;
  std::vector<std::vector<float>> cases;
  cases.push_back(make_activations(n, 1));
  std::vector<float> ties(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ties[static_cast<size_t>(i)] = static_cast<float>(i % 255 - 127) * 0.5f;
  // Q8_0 blocks with amax 127 have id = 1; Q8_K blocks whose first maximum is
  // -127 have iscale = 1: every x.5 is a rounding tie in both.
  for (int64_t b = 0; b < n; b += 32) ties[static_cast<size_t>(b)] = -127.0f;
  cases.push_back(ties);
  std::vector<float> mixed = make_activations(n, 2);
  std::fill(mixed.begin(), mixed.begin() + 256, 0.0f);                            // zero blocks
  for (int64_t i = 256; i < 512; ++i) mixed[static_cast<size_t>(i)] *= 1e30f;      // huge
  for (int64_t i = 512; i < 768; ++i) mixed[static_cast<size_t>(i)] *= 1e-38f;     // subnormal scales
  mixed[800] = INFINITY;
  mixed[1100] = -INFINITY;
  cases.push_back(mixed);
  for (TensorFormat f : {TensorFormat::Q8_0, TensorFormat::Q4_K}) {
    const int64_t bytes = detail::quant_acts_bytes(f, n, 1);
    std::vector<uint8_t> a(static_cast<size_t>(bytes) + 32), b(static_cast<size_t>(bytes) + 32);
    for (size_t c = 0; c < cases.size(); ++c) {
      std::fill(a.begin(), a.end(), 0);
      std::fill(b.begin(), b.end(), 0);
      detail::QuantActs qa = detail::quant_acts_layout(f, n, 1, a.data());
      detail::QuantActs qb = detail::quant_acts_layout(f, n, 1, b.data());
      detail::portable_quant_kernels().quantize(f, cases[c].data(), n, qa, 0);
      detail::avx2_quant_kernels()->quantize(f, cases[c].data(), n, qb, 0);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << format_name(f) << " case " << c;
      std::vector<uint8_t> ref(static_cast<size_t>(activation_bytes(f, n)));
      quantize_activation(f, cases[c].data(), ref.data(), n);
      EXPECT_EQ(std::memcmp(ref.data(), b.data(), ref.size()), 0) << format_name(f) << " case " << c;
    }
  }
}

TEST(KernelsQuant, ResultsAreBitIdenticalForAnyThreadCount) {
  ThreadPool pool2(2), pool3(3);
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat f : kBlockFormats) {
      const int64_t cols = format_info(f).block_elements == 32 ? 2880 : 256 * 9;
      for (int64_t rows : {int64_t{67}, int64_t{203}}) {
        QuantWeights w = make_quant_weights(f, rows, cols, static_cast<uint32_t>(rows));
        const int64_t n = 7;
        std::vector<float> X = make_activations(n * cols, 4);
        std::vector<float> one = run_matmul(w.view, X, n, nullptr);
        EXPECT_TRUE(same_bits(one, run_matmul(w.view, X, n, &pool2))) << label(f, rows, cols);
        EXPECT_TRUE(same_bits(one, run_matmul(w.view, X, n, &pool3))) << label(f, rows, cols);
        std::vector<float> mv = run_matvec(w.view, X, nullptr);
        EXPECT_TRUE(same_bits(mv, run_matvec(w.view, X, &pool2))) << label(f, rows, cols);
        EXPECT_TRUE(same_bits(mv, run_matvec(w.view, X, &pool3))) << label(f, rows, cols);
      }
    }
  }
}

// Batches below, at and above the kernels' token block (32) and tile sizes.
TEST(KernelsQuant, MatmulEqualsRepeatedMatvecBitForBit) {
  ThreadPool pool(2);
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat f : kBlockFormats) {
      const int64_t cols = format_info(f).block_elements == 32 ? 32 * 9 : 256 * 3;
      const int64_t rows = 17;
      QuantWeights w = make_quant_weights(f, rows, cols, 77);
      for (int64_t n : {int64_t{2}, int64_t{5}, int64_t{33}, int64_t{70}}) {
        std::vector<float> X = make_activations(n * cols, static_cast<uint32_t>(n));
        std::vector<float> Y = run_matmul(w.view, X, n, &pool);
        for (int64_t t = 0; t < n; ++t) {
          std::vector<float> x(X.begin() + t * cols, X.begin() + (t + 1) * cols);
          std::vector<float> y = run_matvec(w.view, x, nullptr);
          ASSERT_EQ(std::memcmp(y.data(), Y.data() + t * rows, static_cast<size_t>(rows) * 4), 0)
              << label(f, rows, cols) << " token " << t << " of " << n << " " << kernel_path_name(path);
        }
      }
    }
  }
}

TEST(KernelsQuant, BlockSizeMismatchIsAClearError) {
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(300), y(4);
  testing::expect_error([&] { matvec(WeightView{bytes.data(), TensorFormat::Q4_K, 2, 300}, x.data(), y.data(), nullptr); },
                        {"matvec", "300 columns is not a multiple of the q4_k block size 256"});
  testing::expect_error([&] { matmul(WeightView{bytes.data(), TensorFormat::Q8_0, 2, 40}, x.data(), 1, y.data(), nullptr); },
                        {"matmul", "40 columns is not a multiple of the q8_0 block size 32"});
  testing::expect_error([&] { dequantize_row(WeightView{bytes.data(), TensorFormat::MXFP4, 2, 33}, 0, x.data()); },
                        {"dequantize_row", "33 columns", "mxfp4"});
}

TEST(KernelsQuant, DequantizeRowAndRowBytesHandleBlockFormats) {
  for (TensorFormat f : kBlockFormats) {
    EXPECT_TRUE(weight_format_supported(f)) << format_name(f);
    const int64_t cols = format_info(f).block_elements == 32 ? 32 * 9 : 256 * 3;
    QuantWeights w = make_quant_weights(f, 5, cols, 3);
    EXPECT_EQ(weight_row_bytes(w.view), row_bytes(f, cols));
    std::vector<float> out(static_cast<size_t>(cols));
    for (int64_t r = 0; r < 5; ++r) {
      dequantize_row(w.view, r, out.data());
      EXPECT_EQ(std::memcmp(out.data(), w.values.data() + r * cols, static_cast<size_t>(cols) * 4), 0)
          << format_name(f) << " row " << r;
    }
    WeightView sub = weight_rows(w.view, 2, 2);
    dequantize_row(sub, 1, out.data());
    EXPECT_EQ(std::memcmp(out.data(), w.values.data() + 3 * cols, static_cast<size_t>(cols) * 4), 0);
  }
}

TEST(KernelsQuant, EmptyShapesAreFine) {
  std::vector<uint8_t> bytes(64);
  std::vector<float> x(32, 1.0f), y(3, -1.0f);
  matvec(WeightView{bytes.data(), TensorFormat::Q8_0, 0, 32}, x.data(), y.data(), nullptr);
  matvec(WeightView{bytes.data(), TensorFormat::Q4_K, 3, 0}, x.data(), y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tern
