#include "tern/models/moe_block.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tern/kernels/ops.h"

namespace tern {
namespace {

TEST(RouteTokens, PicksTopKRenormalisedWithTiesToLowerId) {
  // Two tokens, four experts.
  std::vector<float> logits = {0.0f, 2.0f, 2.0f, 1.0f,   //
                               3.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> probs(4);
  Routing r = route_tokens(logits.data(), 2, {4, 2, true}, probs.data());
  EXPECT_EQ(r.experts[0], 1);  // tie between 1 and 2: lower id first
  EXPECT_EQ(r.experts[1], 2);
  EXPECT_FLOAT_EQ(r.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weights[1], 0.5f);
  EXPECT_EQ(r.experts[2], 0);
  EXPECT_EQ(r.experts[3], 1);  // three-way tie at 0.0: lowest id
  EXPECT_NEAR(r.weights[2] + r.weights[3], 1.0f, 1e-6f);
}

TEST(RouteTokens, WithoutRenormalisationWeightsAreSoftmaxOverAllExperts) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  std::vector<float> probs(4);
  Routing r = route_tokens(logits.data(), 1, {4, 2, false}, probs.data());
  double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_EQ(r.experts[0], 3);
  EXPECT_EQ(r.experts[1], 2);
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(2.0) / z, 1e-6);
}

// DeepSeek-V3's noaux_tc on 8 experts in 4 groups of 2, 2 groups kept, top-3.
class SigmoidGrouped : public ::testing::Test {
 protected:
  // Logits whose sigmoids are these scores.
  static std::vector<float> logits_of(const std::vector<double>& p) {
    std::vector<float> l;
    for (double v : p) l.push_back(static_cast<float>(std::log(v / (1 - v))));
    return l;
  }
  Routing route(const std::vector<float>& bias) {
    RouterConfig cfg{8, 3, true, RouterScoring::SigmoidGrouped};
    cfg.selection_bias = bias.data();
    cfg.n_group = 4;
    cfg.topk_group = 2;
    cfg.scaling = 2.5f;
    std::vector<float> logits = logits_of(scores), probs(8);
    return route_tokens(logits.data(), 1, cfg, probs.data());
  }
  const std::vector<double> scores = {0.9, 0.1, 0.5, 0.45, 0.2, 0.2, 0.8, 0.05};
};

TEST_F(SigmoidGrouped, TheBiasSelectsAndTheUnbiasedScoresWeigh) {
  // Choice scores 0.9 0.1 | 0.5 0.45 | 0.95 0.2 | 0.8 0.05: groups score
  // 1.0, 0.95, 1.15, 0.85, so groups 0 and 2 are kept (expert 6's 0.8 in
  // group 3 is not eligible); expert 4 wins on its bias but weighs its 0.2.
  Routing r = route({0, 0, 0, 0, 0.75f, 0, 0, 0});
  ASSERT_EQ(r.experts, (std::vector<int32_t>{4, 0, 5}));
  const double sum = 0.2 + 0.9 + 0.2;
  EXPECT_NEAR(r.weights[0], 2.5 * 0.2 / sum, 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * 0.9 / sum, 1e-6);
  EXPECT_NEAR(r.weights[2], 2.5 * 0.2 / sum, 1e-6);
}

TEST_F(SigmoidGrouped, DroppedGroupsScoreZeroAsTransformersMasksThem) {
  // Every choice score is negative (bias -1): groups 0 and 1 are kept, but
  // transformers fills the dropped groups with 0.0, not -inf, so their
  // experts outrank every kept one; ties at 0 go to the lower ids.
  Routing r = route(std::vector<float>(8, -1.0f));
  ASSERT_EQ(r.experts, (std::vector<int32_t>{4, 5, 6}));
  const double sum = 0.2 + 0.2 + 0.8;
  EXPECT_NEAR(r.weights[2], 2.5 * 0.8 / sum, 1e-6);
}

TEST(RouteTokens, TopKThenSoftmaxWeightsAreSoftmaxOverTheChosenLogits) {
  // gpt_oss: top-k of the (biased) logits, then softmax over those k only.
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 2.0f, 2.0f};
  std::vector<float> probs(5);
  RouterConfig cfg{5, 3, false, RouterScoring::TopKThenSoftmax, nullptr};
  Routing r = route_tokens(logits.data(), 1, cfg, probs.data());
  ASSERT_EQ(r.experts, (std::vector<int32_t>{1, 3, 4}));  // tie 3/4: lower id first
  const double z = std::exp(3.0) + 2 * std::exp(2.0);
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[2], std::exp(2.0) / z, 1e-6);
}

}  // namespace
}  // namespace tern
