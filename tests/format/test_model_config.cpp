#include "tern/format/model_config.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

json qwen3_config() {
  return {{"model_type", "qwen3_moe"},   {"vocab_size", 1000},         {"hidden_size", 64},
          {"num_hidden_layers", 4},      {"num_attention_heads", 4},   {"num_key_value_heads", 2},
          {"head_dim", 32},              {"intermediate_size", 128},   {"moe_intermediate_size", 32},
          {"num_experts", 8},            {"num_experts_per_tok", 2},   {"norm_topk_prob", true},
          {"decoder_sparse_step", 1},    {"mlp_only_layers", {1}},     {"rms_norm_eps", 1e-5},
          {"rope_theta", 1000000.0},     {"max_position_embeddings", 2048}, {"tie_word_embeddings", true}};
}

TEST(ModelConfig, ParsesEveryQwen3MoeFieldThatChangesTheMath) {
  json j = qwen3_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelConfig c = parse_model_config(j, "config.json");
  EXPECT_EQ(c.architecture, "qwen3_moe");
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32) << "head_dim may differ from hidden/heads";
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_TRUE(c.tie_word_embeddings);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 32768);
}

TEST(ModelConfig, MlpOnlyLayersAndSparseStepDecideMoeLayers) {
  json j = qwen3_config();
  ModelConfig c = parse_model_config(j, "config.json");
  EXPECT_TRUE(c.layer_is_moe(0));
  EXPECT_FALSE(c.layer_is_moe(1));
  EXPECT_TRUE(c.layer_is_moe(2));
  EXPECT_EQ(c.num_moe_layers(), 3);
  j["mlp_only_layers"] = json::array();
  j["decoder_sparse_step"] = 2;
  c = parse_model_config(j, "config.json");
  EXPECT_FALSE(c.layer_is_moe(0));
  EXPECT_TRUE(c.layer_is_moe(1));
  EXPECT_FALSE(c.layer_is_moe(2));
  EXPECT_TRUE(c.layer_is_moe(3));
}

TEST(ModelConfig, HeadDimDefaultsToHiddenOverHeads) {
  json j = qwen3_config();
  j.erase("head_dim");
  EXPECT_EQ(parse_model_config(j, "config.json").head_dim, 16);
}

TEST(ModelConfig, UnknownArchitectureListsSupportedOnes) {
  json j = qwen3_config();
  j["model_type"] = "llama9";
  expect_error([&] { parse_model_config(j, "config.json"); },
               {"unsupported architecture 'llama9'", "supported:", "qwen3_moe"});
}

TEST(ModelConfig, MissingOrInvalidFieldsAreNamed) {
  json j = qwen3_config();
  j.erase("hidden_size");
  expect_error([&] { parse_model_config(j, "x/config.json"); }, {"x/config.json", "'hidden_size'", "missing"});
  j = qwen3_config();
  j["num_experts_per_tok"] = 9;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"num_experts_per_tok", "exceeds"});
  j = qwen3_config();
  j["num_key_value_heads"] = 3;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"num_key_value_heads", "divide"});
  j = qwen3_config();
  j["hidden_size"] = "64";
  expect_error([&] { parse_model_config(j, "config.json"); }, {"hidden_size", "integer"});
  j = qwen3_config();
  j["mlp_only_layers"] = {7};
  expect_error([&] { parse_model_config(j, "config.json"); }, {"mlp_only_layers", "layer 7"});
  j = qwen3_config();
  j["rope_scaling"] = {{"type", "weird"}, {"factor", 2.0}};
  expect_error([&] { parse_model_config(j, "config.json"); }, {"rope_scaling", "weird"});
  expect_error([&] { parse_model_config(json::array(), "config.json"); }, {"JSON object"});
  expect_error([&] { parse_model_config(json::object(), "config.json"); }, {"model_type"});
}

TEST(Architectures, Qwen3MoeDeclaresExpertsAndDenseLayers) {
  ModelConfig c = parse_model_config(qwen3_config(), "config.json");
  auto decls = find_arch("qwen3_moe").tensors(c);
  int experts = 0, dense_mlps = 0, lm_heads = 0;
  for (const auto& d : decls) {
    if (d.is_expert) {
      ++experts;
      EXPECT_TRUE(c.layer_is_moe(d.layer));
      EXPECT_TRUE(d.section == "gate" || d.section == "up" || d.section == "down");
    }
    if (d.name.find("mlp.gate_proj") != std::string::npos && !d.is_expert) ++dense_mlps;
    if (d.name == "lm_head.weight") ++lm_heads;
    if (d.name == "model.layers.0.self_attn.q_proj.weight") {
      EXPECT_EQ(d.shape, (std::vector<int64_t>{4 * 32, 64}));
    }
  }
  EXPECT_EQ(experts, 3 * 8 * 3);
  EXPECT_EQ(dense_mlps, 1);
  EXPECT_EQ(lm_heads, 0) << "tied embeddings have no lm_head";
}

}  // namespace
}  // namespace tern
