// attention_decode against a naive float64 implementation with grouped-query
// heads, and across thread counts and kernel paths.
#include "tern/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/kernel_test_util.h"
#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/ops.h"

namespace tern {
namespace {

using testing::random_floats;

std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int64_t n_pos, int64_t n_heads,
                                    int64_t n_kv, int64_t d, double scale) {
  std::vector<double> out(static_cast<size_t>(n_heads * d), 0.0);
  for (int64_t h = 0; h < n_heads; ++h) {
    int64_t kv = h / (n_heads / n_kv);
    std::vector<double> s(static_cast<size_t>(n_pos));
    double max = -INFINITY;
    for (int64_t p = 0; p < n_pos; ++p) {
      double acc = 0;
      for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(q[h * d + i]) * k[(p * n_kv + kv) * d + i];
      s[p] = acc * scale;
      max = std::max(max, s[p]);
    }
    double sum = 0;
    for (auto& e : s) sum += (e = std::exp(e - max));
    for (int64_t p = 0; p < n_pos; ++p)
      for (int64_t i = 0; i < d; ++i) out[h * d + i] += s[p] / sum * v[(p * n_kv + kv) * d + i];
  }
  return out;
}

struct Case {
  int64_t n_pos, n_heads, n_kv, head_dim;
};

std::vector<float> run(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, ThreadPool* pool) {
  std::vector<float> out(static_cast<size_t>(c.n_heads * c.head_dim), -7.0f);
  std::vector<float> scratch(static_cast<size_t>(attention_decode_scratch_floats(c.n_heads, c.n_pos)));
  attention_decode(q.data(), k.data(), v.data(), c.n_pos, c.n_heads, c.n_kv, c.head_dim,
                   1.0f / std::sqrt(static_cast<float>(c.head_dim)), out.data(), scratch.data(), pool);
  return out;
}

TEST(Kernels, AttentionDecodeMatchesNaiveFloat64WithGqa) {
  const Case cases[] = {
      {1, 4, 2, 64}, {7, 8, 2, 64}, {100, 8, 1, 24}, {33, 4, 4, 128}, {300, 16, 4, 17},
  };
  for (KernelPath path : testing::supported_paths()) {
    ScopedKernelPath scoped(path);
    for (const Case& c : cases) {
      // Keys scaled up so the softmax is peaked, not uniform.
      auto q = random_floats(c.n_heads * c.head_dim, 1, -2.0f, 2.0f);
      auto k = random_floats(c.n_pos * c.n_kv * c.head_dim, 2, -2.0f, 2.0f);
      auto v = random_floats(c.n_pos * c.n_kv * c.head_dim, 3);
      auto out = run(c, q, k, v, nullptr);
      auto ref = naive_attention(q, k, v, c.n_pos, c.n_heads, c.n_kv, c.head_dim,
                                 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
      // |v| <= 1; the score errors (~1e-6 relative) move the weights by
      // ~1e-6 * |score| and the weighted sum adds n_pos roundings.
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 2e-6 + 2e-8 * c.n_pos)
            << kernel_path_name(path) << " n_pos " << c.n_pos << " heads " << c.n_heads << "/"
            << c.n_kv << " d " << c.head_dim << " at " << i;
    }
  }
}

TEST(Kernels, AttentionDecodeIsBitIdenticalForOneTwoAndThreeThreads) {
  ThreadPool pool2(2), pool3(3);
  Case c{513, 16, 4, 64};
  auto q = random_floats(c.n_heads * c.head_dim, 4);
  auto k = random_floats(c.n_pos * c.n_kv * c.head_dim, 5);
  auto v = random_floats(c.n_pos * c.n_kv * c.head_dim, 6);
  auto one = run(c, q, k, v, nullptr);
  EXPECT_TRUE(testing::same_bits(one, run(c, q, k, v, &pool2)));
  EXPECT_TRUE(testing::same_bits(one, run(c, q, k, v, &pool3)));
}

// The documented per-head recipe with the public kernels, one head at a time:
// grouping heads that share a kv head must not change a bit.
TEST(Kernels, AttentionDecodeEqualsHeadByHeadDotSoftmaxAxpy) {
  for (KernelPath path : testing::supported_paths()) {
    ScopedKernelPath scoped(path);
    for (Case c : {Case{37, 8, 2, 24}, Case{9, 6, 3, 131}, Case{64, 4, 1, 64}}) {
      auto q = random_floats(c.n_heads * c.head_dim, 7);
      auto k = random_floats(c.n_pos * c.n_kv * c.head_dim, 8);
      auto v = random_floats(c.n_pos * c.n_kv * c.head_dim, 9);
      auto got = run(c, q, k, v, nullptr);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      std::vector<float> want(got.size(), 0.0f), s(static_cast<size_t>(c.n_pos));
      for (int64_t h = 0; h < c.n_heads; ++h) {
        int64_t kv = h / (c.n_heads / c.n_kv);
        for (int64_t p = 0; p < c.n_pos; ++p)
          s[p] = dot(q.data() + h * c.head_dim, k.data() + (p * c.n_kv + kv) * c.head_dim, c.head_dim) * scale;
        softmax(s.data(), c.n_pos);
        for (int64_t p = 0; p < c.n_pos; ++p)
          axpy(s[p], v.data() + (p * c.n_kv + kv) * c.head_dim, want.data() + h * c.head_dim, c.head_dim);
      }
      EXPECT_TRUE(testing::same_bits(got, want)) << kernel_path_name(path) << " d " << c.head_dim;
    }
  }
}

TEST(Kernels, AttentionDecodeRejectsBadHeadCounts) {
  std::vector<float> buf(64);
  EXPECT_THROW(attention_decode(buf.data(), buf.data(), buf.data(), 1, 3, 2, 4, 1.0f, buf.data(),
                                buf.data(), nullptr),
               Error);
  EXPECT_THROW(attention_decode(buf.data(), buf.data(), buf.data(), 0, 2, 2, 4, 1.0f, buf.data(),
                                buf.data(), nullptr),
               Error);
}

// Positions [first, last] of a ring of `capacity` slots, written as the
// engine writes them (position p in slot p % capacity), against the naive
// float64 attention over exactly those positions, with and without sinks.
TEST(Kernels, AttentionOverARingWindowWithSinksMatchesNaiveFloat64) {
  const int64_t n_heads = 8, n_kv = 2, d = 32, capacity = 16;
  const int64_t kv_dim = n_kv * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto q = random_floats(n_heads * d, 41);
  auto sinks = random_floats(n_heads, 42);
  for (auto& s : sinks) s *= 4.0f;  // logits of a size that matters
  for (int64_t last : {3, 15, 16, 23, 40}) {
    const int64_t first = std::max<int64_t>(0, last - capacity + 1);
    const int64_t n = last - first + 1;
    auto flat_k = random_floats(n * kv_dim, 100 + static_cast<uint32_t>(last));
    auto flat_v = random_floats(n * kv_dim, 200 + static_cast<uint32_t>(last));
    std::vector<float> ring_k(static_cast<size_t>(capacity * kv_dim)), ring_v(ring_k.size());
    for (int64_t p = first; p <= last; ++p)
      for (int64_t i = 0; i < kv_dim; ++i) {
        ring_k[static_cast<size_t>((p % capacity) * kv_dim + i)] = flat_k[static_cast<size_t>((p - first) * kv_dim + i)];
        ring_v[static_cast<size_t>((p % capacity) * kv_dim + i)] = flat_v[static_cast<size_t>((p - first) * kv_dim + i)];
      }
    for (bool with_sinks : {false, true}) {
      std::vector<double> want = naive_attention(q, flat_k, flat_v, n, n_heads, n_kv, d, scale);
      if (with_sinks) {  // softmax over the row plus the sink: every weight times Z / (Z + e^sink)
        for (int64_t h = 0; h < n_heads; ++h) {
          const int64_t kvh = h / (n_heads / n_kv);
          double max = sinks[static_cast<size_t>(h)], z = 0;
          std::vector<double> sc(static_cast<size_t>(n));
          for (int64_t p = 0; p < n; ++p) {
            double acc = 0;
            for (int64_t i = 0; i < d; ++i)
              acc += static_cast<double>(q[static_cast<size_t>(h * d + i)]) * flat_k[static_cast<size_t>((p * n_kv + kvh) * d + i)];
            sc[static_cast<size_t>(p)] = acc * scale;
            max = std::max(max, sc[static_cast<size_t>(p)]);
          }
          for (double e : sc) z += std::exp(e - max);
          const double shrink = z / (z + std::exp(sinks[static_cast<size_t>(h)] - max));
          for (int64_t i = 0; i < d; ++i) want[static_cast<size_t>(h * d + i)] *= shrink;
        }
      }
      for (KernelPath path : testing::supported_paths()) {
        ScopedKernelPath scoped(path);
        std::vector<float> out(static_cast<size_t>(n_heads * d)), scratch(static_cast<size_t>(attention_decode_scratch_floats(n_heads, n)));
        const KVRing ring{ring_k.data(), ring_v.data(), capacity, kv_dim};
        attention_decode(q.data(), ring, first, last,
                         AttentionHeads{n_heads, n_kv, d, static_cast<float>(scale), with_sinks ? sinks.data() : nullptr},
                         out.data(), scratch.data(), nullptr);
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], want[i], 2e-6) << "last " << last << " sinks " << with_sinks << " path "
                                              << kernel_path_name(path) << " i " << i;
        if (!with_sinks) {  // the ring gives the flat layout's bits exactly
          std::vector<float> flat_out(out.size());
          attention_decode(q.data(), flat_k.data(), flat_v.data(), n, n_heads, n_kv, d, static_cast<float>(scale),
                           flat_out.data(), scratch.data(), nullptr);
          ASSERT_EQ(out, flat_out) << "last " << last;
        }
      }
    }
  }
}

TEST(Kernels, AttentionRejectsARangeLargerThanTheRing) {
  std::vector<float> buf(64, 0.0f);
  const KVRing ring{buf.data(), buf.data(), 2, 4};
  EXPECT_THROW(attention_decode(buf.data(), ring, 0, 2, AttentionHeads{1, 1, 4, 1.0f, nullptr}, buf.data(),
                                buf.data(), nullptr),
               Error);
}

}  // namespace
}  // namespace tern
