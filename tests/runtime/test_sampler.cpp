#include "tern/runtime/sampler.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "tern/core/error.h"

namespace tern {
namespace {

std::vector<float> logits() { return {1.0f, 3.0f, 2.9f, -1.0f, 0.5f}; }

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  Sampler s({.greedy = true});
  auto l = logits();
  EXPECT_EQ(s.sample(l, {}), 1);
  std::vector<float> tie = {0.0f, 2.0f, 2.0f};
  EXPECT_EQ(s.sample(tie, {}), 1);
  Sampler zero_temp({.temperature = 0.0f});
  l = logits();
  EXPECT_EQ(zero_temp.sample(l, {}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  Sampler a({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  Sampler b({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  for (int i = 0; i < 50; ++i) {
    auto la = logits(), lb = logits();
    EXPECT_EQ(a.sample(la, {}), b.sample(lb, {}));
  }
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 1});
  std::map<int32_t, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
    ++count[s.sample(l, {})];
  }
  EXPECT_NEAR(count[1] / static_cast<double>(n), 0.75, 0.02);
}

TEST(Sampler, TopKTopPAndMinPRestrictTheCandidates) {
  for (int i = 0; i < 200; ++i) {
    Sampler k({.temperature = 5.0f, .top_k = 2, .top_p = 1.0f, .seed = static_cast<uint64_t>(i)});
    auto l = logits();
    int32_t t = k.sample(l, {});
    EXPECT_TRUE(t == 1 || t == 2) << t;
    // 3.0 and 2.9 carry most of the mass at temperature 0.1: top-p 0.5 keeps only the best.
    Sampler p({.temperature = 0.1f, .top_k = 0, .top_p = 0.5f, .seed = static_cast<uint64_t>(i)});
    l = logits();
    EXPECT_EQ(p.sample(l, {}), 1);
    Sampler m({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.5f, .seed = static_cast<uint64_t>(i)});
    l = logits();
    t = m.sample(l, {});
    EXPECT_TRUE(t == 1 || t == 2) << t;  // exp(-1) relative probability for 1.0 is < 0.5 of the top
  }
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  Sampler s({.greedy = true, .repetition_penalty = 2.0f});
  auto l = logits();
  std::vector<int32_t> seen = {1};
  EXPECT_EQ(s.sample(l, seen), 2);  // 3.0 / 2 = 1.5 < 2.9
}

// Issue 16: NaN weights in a model file give NaN logits, which broke the
// candidate sort's ordering (undefined behaviour in std::sort) and the
// sampling distribution.
TEST(Sampler, NanAndInfiniteLogitsNeverBreakSampling) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> l(64);
    for (size_t i = 0; i < l.size(); ++i) l[i] = i % 3 == 0 ? nan : static_cast<float>((i * 7919 + seed) % 100) / 10;
    l[5] = 1e30f;
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = seed});
    const int32_t id = s.sample(l, {});
    EXPECT_NE(id % 3, 0) << "a NaN logit was sampled";
  }
  std::vector<float> with_inf = {0.0f, inf, nan, 1.0f};
  Sampler greedy({.greedy = true});
  EXPECT_EQ(greedy.sample(with_inf, {}), 1);
  with_inf = {0.0f, inf, nan, 1.0f};
  EXPECT_EQ(Sampler({.temperature = 1.0f, .top_k = 2}).sample(with_inf, {}), 1);
  std::vector<float> all_nan(8, nan);
  EXPECT_THROW(Sampler({.temperature = 1.0f}).sample(all_nan, {}), Error);
}

TEST(Sampler, RejectsInvalidOptions) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.min_p = 1.0f}), Error);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), Error);
  EXPECT_THROW(Sampler({.presence_penalty = 2.5f}), Error);
  EXPECT_THROW(Sampler({.frequency_penalty = -3.0f}), Error);
}

// OpenAI's penalties count the tokens this sampler drew (not the prompt):
// logit -= frequency * count + presence * (count > 0).
TEST(Sampler, PresenceAndFrequencyPenaltiesCountDrawnTokens) {
  const std::vector<float> base = {1.0f, 0.9f, 0.5f, 0.0f};
  auto draws = [&](SamplerOptions o, int n) {
    Sampler s(o);
    std::vector<int32_t> out;
    const std::vector<int32_t> prompt = {1, 1, 1};  // never penalised by these two
    for (int i = 0; i < n; ++i) {
      std::vector<float> l = base;
      out.push_back(s.sample(l, prompt));
    }
    return out;
  };
  EXPECT_EQ(draws({.greedy = true}, 3), (std::vector<int32_t>{0, 0, 0}));
  // presence 0.2: token 0 drops to 0.8 after its first draw, below token 1 (0.9);
  // then token 1 drops to 0.7, and token 0 (0.8) leads again: it alternates.
  EXPECT_EQ(draws({.greedy = true, .presence_penalty = 0.2f}, 4), (std::vector<int32_t>{0, 1, 0, 0}));
  // frequency 0.3: 1.0 -> 0.7 after one draw of 0, so 1 (0.9) leads; 0.9 -> 0.6, 0 (0.7) leads;
  // then 0 at 0.4 and 1 at 0.6: 1.
  EXPECT_EQ(draws({.greedy = true, .frequency_penalty = 0.3f}, 4), (std::vector<int32_t>{0, 1, 0, 1}));
}

}  // namespace
}  // namespace tern
