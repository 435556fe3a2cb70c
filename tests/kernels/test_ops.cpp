// Element-wise kernels, reductions and rotary embedding against float64
// references.
#include "tern/kernels/ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "kernels/kernel_test_util.h"
#include "support/expect_error.h"
#include "tern/kernels/fast_exp.h"
#include "tern/kernels/rope.h"

namespace tern {
namespace {

using testing::random_floats;
using testing::supported_paths;

const int64_t kSizes[] = {1, 7, 8, 33, 100, 771};

// |got - want| <= rel * |want| + abs
void expect_close(double got, double want, double rel, double abs, const char* what, int64_t i) {
  ASSERT_LE(std::fabs(got - want), rel * std::fabs(want) + abs) << what << " [" << i << "]";
}

TEST(Kernels, RmsnormMatchesFloat64Reference) {
  for (int64_t n : kSizes) {
    auto x = random_floats(n, 1, -3.0f, 3.0f);
    auto w = random_floats(n, 2, 0.5f, 1.5f);
    std::vector<float> out(n), unweighted(n);
    rmsnorm(x.data(), w.data(), n, 1e-6f, out.data());
    rmsnorm(x.data(), nullptr, n, 1e-6f, unweighted.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    double s = 1.0 / std::sqrt(ss / n + 1e-6);
    // Three float roundings (scale, x*s, *w): within 4 ulp relative.
    for (int64_t i = 0; i < n; ++i) {
      expect_close(out[i], x[i] * s * w[i], 4e-7, 0, "rmsnorm", i);
      expect_close(unweighted[i], x[i] * s, 3e-7, 0, "rmsnorm w=null", i);
    }
  }
}

TEST(Kernels, RmsnormWorksInPlaceAndIsPathIndependent) {
  auto x = random_floats(771, 3);
  auto w = random_floats(771, 4);
  std::vector<float> ref(771);
  rmsnorm(x.data(), w.data(), 771, 1e-5f, ref.data());
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    auto inplace = x;
    rmsnorm(inplace.data(), w.data(), 771, 1e-5f, inplace.data());
    EXPECT_TRUE(testing::same_bits(inplace, ref));
  }
}

TEST(Kernels, SoftmaxMatchesFloat64Reference) {
  for (int64_t n : kSizes) {
    auto x = random_floats(n, 5, -20.0f, 20.0f);
    auto y = x;
    softmax(y.data(), n);
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max<double>(max, v);
    for (float v : x) sum += std::exp(v - max);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      // x - max is rounded to float before exp (as PyTorch does): a relative
      // error of |x - max| * 2^-24 on top of a few roundings.
      double rel = 4e-7 + 1.1 * std::fabs(x[i] - max) * std::ldexp(1.0, -24);
      expect_close(y[i], std::exp(x[i] - max) / sum, rel, 1e-37, "softmax", i);
      total += y[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

TEST(Kernels, SoftmaxOfLargeValuesDoesNotOverflow) {
  std::vector<float> x = {1000.0f, 1001.0f, 1002.0f, 3e38f, 3e38f, -3e38f};
  softmax(x.data(), 6);
  for (float v : x) EXPECT_TRUE(std::isfinite(v));
  EXPECT_FLOAT_EQ(x[3], 0.5f);
  EXPECT_FLOAT_EQ(x[4], 0.5f);
  EXPECT_EQ(x[0], 0.0f);
  std::vector<float> small = {1000.0f, 1001.0f, 1002.0f};
  softmax(small.data(), 3);
  double e0 = std::exp(-2.0), e1 = std::exp(-1.0), sum = e0 + e1 + 1.0;
  EXPECT_NEAR(small[0], e0 / sum, 1e-7);
  EXPECT_NEAR(small[2], 1.0 / sum, 1e-7);
}

TEST(Kernels, SoftmaxHandlesInfinityNanAndAllMasked) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, 0.0f, -inf, 0.0f};
  softmax(x.data(), 4);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 0.5f);
  std::vector<float> masked = {-inf, -inf};
  softmax(masked.data(), 2);
  EXPECT_TRUE(std::isnan(masked[0]));  // undefined, as in PyTorch
  std::vector<float> with_nan = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  softmax(with_nan.data(), 3);
  for (float v : with_nan) EXPECT_TRUE(std::isnan(v));
  std::vector<float> with_inf = {1.0f, inf};
  softmax(with_inf.data(), 2);
  for (float v : with_inf) EXPECT_TRUE(std::isnan(v));
}

TEST(Kernels, FastExpIsWithinOneUlpOfExp) {
  // Every 64th float in [-87.3, 88], both signs.
  double worst = 0;
  for (uint32_t bits = 0; bits < 0x42b00000u; bits += 64) {
    for (float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)}) {
      if (x < -87.33f) continue;
      double want = std::exp(static_cast<double>(x));
      double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
      double err = std::fabs(detail::fast_exp(x) - want) / ulp;
      worst = std::max(worst, err);
      ASSERT_LE(err, 1.0) << "x = " << x;
    }
  }
  EXPECT_GT(worst, 0.0);
  EXPECT_EQ(detail::fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(detail::fast_exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(detail::fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(detail::fast_exp(1000.0f)));
}

TEST(Kernels, SiluAndSwigluMatchFloat64Reference) {
  for (int64_t n : kSizes) {
    auto g = random_floats(n, 7, -30.0f, 30.0f);
    auto u = random_floats(n, 8, -2.0f, 2.0f);
    std::vector<float> s(n), sw(n);
    silu(g.data(), s.data(), n);
    swiglu(g.data(), u.data(), sw.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
      expect_close(s[i], ref, 4e-7, 1e-37, "silu", i);
      expect_close(sw[i], ref * u[i], 5e-7, 1e-37, "swiglu", i);
    }
  }
  float extreme[3] = {-200.0f, 200.0f, 0.0f}, out[3];
  silu(extreme, out, 3);
  EXPECT_NEAR(out[0], 0.0f, 1e-30);  // -200 / (1 + exp(88)): exp is capped
  EXPECT_EQ(out[1], 200.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Kernels, AddScaleAxpyDotMatchFloat64Reference) {
  for (KernelPath path : supported_paths()) {
    ScopedKernelPath scoped(path);
    for (int64_t n : kSizes) {
      auto a = random_floats(n, 9), b = random_floats(n, 10);
      std::vector<float> sum(n), scaled = a, y = b;
      add(a.data(), b.data(), sum.data(), n);
      scale(scaled.data(), 0.3f, n);
      axpy(1.7f, a.data(), y.data(), n);
      double ref_dot = 0, abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(sum[i], a[i] + b[i]);
        EXPECT_EQ(scaled[i], a[i] * 0.3f);
        // One rounding (fused) or two (portable).
        expect_close(y[i], 1.7 * a[i] + b[i], 0, 2.4e-7 * (std::fabs(1.7 * a[i]) + std::fabs(b[i])), "axpy", i);
        ref_dot += static_cast<double>(a[i]) * b[i];
        abs_sum += std::fabs(static_cast<double>(a[i]) * b[i]);
      }
      EXPECT_NEAR(dot(a.data(), b.data(), n), ref_dot, testing::dot_error_bound(n, abs_sum));
    }
  }
}

TEST(Kernels, RopeInvFreqMatchesFloat64Formula) {
  auto inv = rope_inv_freq(128, 1e6);
  ASSERT_EQ(inv.size(), 64u);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(inv[i], static_cast<float>(1.0 / std::pow(1e6, 2.0 * i / 128)));
  auto linear = rope_inv_freq(128, 1e6, {RopeScaling::Kind::Linear, 4.0});
  for (int i = 0; i < 64; ++i) EXPECT_EQ(linear[i], static_cast<float>(1.0 / std::pow(1e6, 2.0 * i / 128) / 4.0));
  EXPECT_THROW(rope_inv_freq(7, 1e4), Error);
  EXPECT_THROW(rope_inv_freq(8, 0), Error);
}

TEST(Kernels, RopeMatchesDirectCosSinInDoubleRotateHalf) {
  for (int64_t head_dim : {2, 8, 64, 128}) {
    auto inv = rope_inv_freq(head_dim, 10000.0);
    for (int64_t pos : {0, 1, 17, 4095, 40000}) {
      auto x = random_floats(head_dim, static_cast<uint32_t>(pos + head_dim));
      auto y = x;
      rope(y.data(), head_dim, pos, inv.data());
      const int64_t half = head_dim / 2;
      for (int64_t i = 0; i < half; ++i) {
        double angle = static_cast<double>(pos) * inv[i];
        double c = std::cos(angle), s = std::sin(angle);
        double x1 = x[i], x2 = x[i + half];
        double bound = 4e-7 * (std::fabs(x1) + std::fabs(x2));
        EXPECT_NEAR(y[i], x1 * c - x2 * s, bound) << "pos " << pos << " i " << i;
        EXPECT_NEAR(y[i + half], x2 * c + x1 * s, bound) << "pos " << pos << " i " << i;
      }
      if (pos == 0) {
        EXPECT_TRUE(testing::same_bits(x, y));
      }
    }
  }
}

TEST(Kernels, RopeHeadsShareOneTable) {
  const int64_t heads = 3, head_dim = 64;
  auto inv = rope_inv_freq(head_dim, 1e6);
  auto x = random_floats(heads * head_dim, 4);
  auto each = x;
  for (int64_t h = 0; h < heads; ++h) rope(each.data() + h * head_dim, head_dim, 123, inv.data());
  std::vector<float> c(head_dim / 2), s(head_dim / 2);
  rope_cos_sin(123, inv.data(), head_dim / 2, c.data(), s.data());
  rope_apply_heads(x.data(), heads, head_dim, c.data(), s.data());
  EXPECT_TRUE(testing::same_bits(x, each));
}

TEST(Kernels, RopeLinearScalingInterpolatesPositions) {
  auto plain = rope_inv_freq(64, 10000.0);
  auto scaled = rope_inv_freq(64, 10000.0, {RopeScaling::Kind::Linear, 4.0});
  auto a = random_floats(64, 5);
  auto b = a;
  rope(a.data(), 64, 8, scaled.data());  // position 8 / 4 ...
  rope(b.data(), 64, 2, plain.data());   // ... is position 2
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(Ops, ClampedSwigluMatchesGptOssFormulaInFloat64) {
  // gate clamped above only, up on both sides, (up + 1) * g * sigmoid(alpha g).
  const float limit = 7.0f, alpha = 1.702f;
  std::vector<float> gate = {-30.0f, -2.0f, -0.1f, 0.0f, 0.5f, 3.0f, 7.0f, 9.0f, 50.0f};
  std::vector<float> up = {-9.0f, -7.5f, -1.0f, 0.0f, 0.25f, 2.0f, 6.9f, 8.0f, -50.0f};
  std::vector<float> out(gate.size());
  swiglu_clamped(gate.data(), up.data(), out.data(), static_cast<int64_t>(gate.size()), limit, alpha);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min<double>(gate[i], limit), u = std::clamp<double>(up[i], -limit, limit);
    const double want = (u + 1) * g / (1 + std::exp(-static_cast<double>(alpha) * g));
    EXPECT_NEAR(out[i], want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
}

TEST(Rope, YarnFrequenciesAndAttentionFactorMatchGptOss) {
  // gpt-oss: head_dim 64, theta 150000, factor 32, original 4096, beta 32 / 1,
  // truncate false. Values in double from docs/gpt_oss_facts.md section 4.5.
  RopeScaling y;
  y.kind = RopeScaling::Kind::Yarn;
  y.factor = 32;
  y.original_max_positions = 4096;
  y.beta_fast = 32;
  y.beta_slow = 1;
  y.truncate = false;
  const std::vector<float> f = rope_inv_freq(64, 150000, y);
  ASSERT_EQ(f.size(), 32u);
  const std::pair<int, double> want[] = {{0, 1.0},
                                         {8, 0.050813274815461475},
                                         {9, 0.031705696184663769},
                                         {17, 1.2931870124506317e-4},
                                         {18, 3.8308812373753384e-5},
                                         {31, 3.0235114281192144e-7}};
  for (auto [i, v] : want) EXPECT_NEAR(f[static_cast<size_t>(i)], v, 1e-7 * v) << i;
  EXPECT_NEAR(rope_attention_factor(y), 1.3465735902799727, 1e-15);
  // truncate (Hugging Face's default when the key is absent): range [8, 18].
  y.truncate = true;
  const std::vector<float> t = rope_inv_freq(64, 150000, y);
  const double base9 = std::pow(150000.0, -18.0 / 64.0);
  EXPECT_NEAR(t[9], base9 / 32 * 0.1 + base9 * 0.9, 1e-7 * base9);
  EXPECT_EQ(rope_attention_factor(RopeScaling{}), 1.0);
}

}  // namespace
}  // namespace tern
