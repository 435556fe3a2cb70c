// config.json parsing of DeepSeek-V3's family (deepseek_v3, glm4_moe): the
// released DeepSeek-V3, Kimi-K2, GLM-4.5 and GLM-4.5-Air configs (synth's
// real-shape presets hold them) give the MLA, routing, rotary and layer
// fields, transformers' defaults fill what a config omits, the latent KV
// cache is sized per position as latent + rope key, and what Tern cannot run
// is refused naming the field.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"
#include "tern/models/model.h"
#include "tern/synth/presets.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

json ds_released(const std::string& name, const std::string& arch = "deepseek_v3") {
  return find_synth_preset(arch, name).config;
}

ModelConfig parse_ds(const json& j) { return parse_model_config(j, "config.json"); }

json ds_with(json j, const std::string& key, json value) {
  j[key] = std::move(value);
  return j;
}

TEST(DeepseekV3Config, AsReleased) {
  const ModelConfig c = parse_ds(ds_released("deepseek-v3"));
  EXPECT_TRUE(c.mla.present());
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(c.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(c.mla.v_head_dim, 128);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_EQ(c.head_dim, 192);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.router_scoring, "sigmoid_grouped");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 2048);
  EXPECT_FALSE(c.shared_expert_gated);
  EXPECT_EQ(c.num_moe_layers(), 58);  // 61 layers, the first 3 dense
  EXPECT_FALSE(c.layer_is_moe(2));
  EXPECT_TRUE(c.layer_is_moe(3));
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->type, "yarn");
  EXPECT_EQ(c.rope_scaling->factor, 40);
  EXPECT_EQ(c.rope_scaling->mscale_all_dim, 1.0);
  // The latent cache: 512 + 64 floats per position and layer, where full K/V
  // would be 128 heads x (192 + 128) = 40,960: 71x smaller.
  EXPECT_EQ(kv_cache_bytes(c, 4096), uint64_t{4} * 576 * 61 * 4096);
}

TEST(DeepseekV3Config, KimiK2AsReleased) {
  const ModelConfig c = parse_ds(ds_released("kimi-k2"));
  EXPECT_EQ(c.num_experts, 384);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.num_moe_layers(), 60);
  EXPECT_EQ(c.vocab_size, 163840);
}

TEST(DeepseekV3Config, DefaultsAndPlainQProjection) {
  json j = ds_released("deepseek-v3");
  for (const char* k : {"q_lora_rank", "kv_lora_rank", "n_group", "topk_group", "first_k_dense_replace",
                        "n_shared_experts", "norm_topk_prob", "routed_scaling_factor", "rope_interleave"})
    j.erase(k);
  const ModelConfig c = parse_ds(j);  // DeepseekV3Config's defaults
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.num_moe_layers(), 58);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.mla.rope_interleave);
  // null (not absent) means a plain q_proj, as DeepSeek-V2-Lite ships it.
  const ModelConfig lite = parse_ds(ds_with(ds_released("deepseek-v3"), "q_lora_rank", nullptr));
  EXPECT_EQ(lite.mla.q_lora_rank, 0);
  bool has_q_proj = false, has_q_a = false;
  for (const TensorDecl& d : find_arch("deepseek_v3").tensors(lite).tensors) {
    has_q_proj = has_q_proj || d.name == "model.layers.0.self_attn.q_proj.weight";
    has_q_a = has_q_a || d.name == "model.layers.0.self_attn.q_a_proj.weight";
  }
  EXPECT_TRUE(has_q_proj);
  EXPECT_FALSE(has_q_a);
}

TEST(DeepseekV3Config, RefusalsNameTheField) {
  const json j = ds_released("deepseek-v3");
  expect_error([&] { parse_ds(ds_with(j, "topk_method", "greedy")); }, {"'topk_method'", "noaux_tc"});
  expect_error([&] { parse_ds(ds_with(j, "scoring_func", "softmax")); }, {"'scoring_func'"});
  expect_error([&] { parse_ds(ds_with(j, "n_group", 7)); }, {"'n_group'", "divide"});
  expect_error([&] { parse_ds(ds_with(j, "n_group", 256)); }, {"'n_group'", "at least 2"});
  expect_error([&] { parse_ds(ds_with(j, "topk_group", 9)); }, {"'topk_group'"});
  expect_error([&] { parse_ds(ds_with(ds_with(j, "topk_group", 1), "num_experts_per_tok", 33)); },
               {"'num_experts_per_tok'", "topk_group"});
  expect_error([&] { parse_ds(ds_with(j, "moe_layer_freq", 2)); }, {"'moe_layer_freq'"});
  expect_error([&] { parse_ds(ds_with(j, "first_k_dense_replace", 62)); }, {"'first_k_dense_replace'"});
  expect_error([&] { parse_ds(ds_with(j, "qk_rope_head_dim", 63)); }, {"'qk_rope_head_dim'", "even"});
  expect_error([&] { parse_ds(ds_with(j, "kv_lora_rank", 0)); }, {"'kv_lora_rank'"});
  expect_error([&] { parse_ds(ds_with(j, "hidden_act", "gelu")); }, {"'hidden_act'", "silu"});
  expect_error([&] { parse_ds(ds_with(j, "routed_scaling_factor", -1.0)); }, {"'routed_scaling_factor'"});
  json lin = j;
  lin["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  expect_error([&] { parse_ds(lin); }, {"'rope_scaling'", "yarn"});
}

// The FP8 release's quantization_config, as DeepSeek-V3/R1 and Kimi-K2 ship it.
json fp8_config() {
  return {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
          {"weight_block_size", {128, 128}}};
}

TEST(DeepseekV3Config, Fp8ReleaseGivesItsBlocks) {
  const json j = ds_released("deepseek-v3");
  EXPECT_FALSE(parse_ds(j).fp8.present());
  const ModelConfig c = parse_ds(ds_with(j, "quantization_config", fp8_config()));
  EXPECT_EQ(c.fp8.rows, 128);
  EXPECT_EQ(c.fp8.cols, 128);
  json q = fp8_config();
  q["weight_block_size"] = {64, 32};
  EXPECT_EQ(parse_ds(ds_with(j, "quantization_config", q)).fp8.cols, 32);
}

TEST(DeepseekV3Config, OtherQuantizationsAreRefusedNamingThem) {
  const json j = ds_released("deepseek-v3");
  auto with_q = [&](auto edit) {
    json q = fp8_config();
    edit(q);
    return ds_with(j, "quantization_config", q);
  };
  expect_error([&] { parse_ds(with_q([](json& q) { q["fmt"] = "e5m2"; })); }, {"'quantization_config'", "e5m2"});
  expect_error([&] { parse_ds(with_q([](json& q) { q.erase("weight_block_size"); })); },
               {"'quantization_config'", "weight_block_size"});
  expect_error([&] { parse_ds(with_q([](json& q) { q["weight_block_size"] = {128}; })); },
               {"'quantization_config'", "weight_block_size"});
  expect_error([&] { parse_ds(with_q([](json& q) { q["weight_block_size"] = {0, 128}; })); },
               {"'quantization_config'", "[0, 128]"});
  expect_error([&] { parse_ds(ds_with(j, "quantization_config", {{"quant_method", "awq"}})); },
               {"'quantization_config'", "awq", "BF16"});
  expect_error([&] { parse_ds(ds_with(j, "quantization_config", "fp8")); }, {"'quantization_config'"});
  // The same reader serves every Llama-style architecture.
  expect_error([&] { parse_ds(ds_with(ds_released("glm-4.5", "glm4_moe"), "quantization_config",
                                      {{"quant_method", "compressed-tensors"}})); },
               {"'quantization_config'", "compressed-tensors"});
}

TEST(Glm4MoeConfig, AsReleased) {
  const ModelConfig c = parse_ds(ds_released("glm-4.5", "glm4_moe"));
  EXPECT_FALSE(c.mla.present());
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 64);  // partial_rotary_factor 0.5
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.num_experts, 160);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.router_scoring, "sigmoid_grouped");
  EXPECT_EQ(c.num_moe_layers(), 89);  // 92 layers, the first 3 dense
  EXPECT_EQ(c.shared_expert_intermediate_size, 1536);
  // GQA K and V: 2 x 8 x 128 floats per position and layer.
  EXPECT_EQ(kv_cache_bytes(c, 1024), uint64_t{2} * 4 * 8 * 128 * 92 * 1024);
  const ModelConfig air = parse_ds(ds_released("glm-4.5-air", "glm4_moe"));
  EXPECT_FALSE(air.qk_norm);
  EXPECT_EQ(air.num_moe_layers(), 45);
  EXPECT_EQ(air.num_experts, 128);
}

TEST(Glm4MoeConfig, DefaultsAndRefusals) {
  json j = ds_released("glm-4.5", "glm4_moe");
  for (const char* k : {"partial_rotary_factor", "use_qk_norm", "n_group", "topk_group", "routed_scaling_factor"})
    j.erase(k);
  const ModelConfig c = parse_ds(j);  // Glm4MoeConfig's defaults
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.routed_scaling_factor, 1.0);
  const json g = ds_released("glm-4.5", "glm4_moe");
  expect_error([&] { parse_ds(ds_with(g, "partial_rotary_factor", 0.0)); }, {"'partial_rotary_factor'"});
  expect_error([&] { parse_ds(ds_with(g, "partial_rotary_factor", 0.01)); }, {"'partial_rotary_factor'", "even"});
  expect_error([&] { parse_ds(ds_with(g, "rope_scaling", {{"type", "yarn"}, {"factor", 4.0}})); },
               {"'rope_scaling'"});
  expect_error([&] { parse_ds(ds_with(g, "topk_method", "greedy")); }, {"'topk_method'", "glm4_moe"});
  expect_error([&] { parse_ds(ds_with(g, "hidden_act", "gelu")); }, {"'hidden_act'"});
}

}  // namespace
}  // namespace tern
