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
