// config.json parsing of the Llama-style MoE families (mixtral, olmoe,
// qwen2_moe): the released configs (synth's real-shape presets hold them
// verbatim) give the fields that change the math, transformers' defaults
// fill what they omit, and what Tern cannot run is refused naming the field.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "tern/format/model_config.h"
#include "tern/models/model.h"
#include "tern/synth/presets.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

json released(const std::string& arch, const std::string& name) { return find_synth_preset(arch, name).config; }

ModelConfig parse_cfg(const json& j) { return parse_model_config(j, "config.json"); }

json with_field(json j, const std::string& key, json value) {
  j[key] = std::move(value);
  return j;
}

TEST(LlamaMoeConfig, Mixtral8x7bAsReleased) {
  const ModelConfig c = parse_cfg(released("mixtral", "mixtral-8x7b"));
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 14336);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.num_moe_layers(), 32);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.sliding_window, 0);  // null as released
  EXPECT_FALSE(c.layer_is_sliding(0));
}

TEST(LlamaMoeConfig, MixtralSlidingWindowCoversEveryLayer) {
  const ModelConfig c = parse_cfg(with_field(released("mixtral", "mixtral-8x7b"), "sliding_window", 4096));
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_TRUE(c.layer_is_sliding(l)) << l;
  // Every layer's KV cache keeps only the window.
  EXPECT_EQ(kv_cache_bytes(c, 32768), uint64_t{2} * 4 * 8 * 128 * 32 * 4096);
}

TEST(LlamaMoeConfig, MixtralDefaultsAndRefusals) {
  json j = released("mixtral", "mixtral-8x7b");
  j.erase("num_local_experts");
  j.erase("num_experts_per_tok");
  j.erase("rms_norm_eps");
  const ModelConfig c = parse_cfg(j);  // MixtralConfig's defaults
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  const json m = released("mixtral", "mixtral-8x7b");
  expect_error([&] { parse_cfg(with_field(m, "hidden_act", "gelu")); }, {"'hidden_act'", "silu"});
  expect_error([&] { parse_cfg(with_field(m, "sliding_window", 0)); }, {"'sliding_window'"});
  expect_error([&] { parse_cfg(with_field(m, "num_experts_per_tok", 9)); }, {"'num_experts_per_tok'"});
  expect_error([&] { parse_cfg(with_field(m, "attention_bias", true)); }, {"'attention_bias'", "no biases"});
  expect_error([&] { parse_cfg(with_field(m, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})); }, {"'rope_scaling'"});
}

TEST(LlamaMoeConfig, Olmoe1b7bAsReleased) {
  const ModelConfig c = parse_cfg(released("olmoe", "olmoe-1b-7b"));
  EXPECT_EQ(c.num_experts, 64);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 1024);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);  // the released config.json has none: OlmoeConfig's default
  EXPECT_EQ(c.clip_qkv, 0);         // null
  EXPECT_EQ(c.num_moe_layers(), 16);
  EXPECT_EQ(parse_cfg(with_field(released("olmoe", "olmoe-1b-7b"), "clip_qkv", 8.0)).clip_qkv, 8.0);
}

TEST(LlamaMoeConfig, OlmoeRefusals) {
  const json o = released("olmoe", "olmoe-1b-7b");
  expect_error([&] { parse_cfg(with_field(o, "head_dim", 64)); }, {"'head_dim'", "hidden_size / num_attention_heads"});
  expect_error([&] { parse_cfg(with_field(o, "clip_qkv", -1.0)); }, {"'clip_qkv'"});
  expect_error([&] { parse_cfg(with_field(with_field(o, "num_attention_heads", 24), "num_key_value_heads", 8)); },
               {"hidden_size is not divisible by num_attention_heads"});
}

TEST(LlamaMoeConfig, Qwen2MoeAsReleased) {
  const ModelConfig c = parse_cfg(released("qwen2_moe", "qwen1.5-moe-a2.7b"));
  EXPECT_TRUE(c.attention_bias);  // qkv_bias defaults to true
  EXPECT_EQ(c.num_experts, 60);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window false: sliding_window is ignored
  EXPECT_EQ(c.num_moe_layers(), 24);
  const ModelConfig big = parse_cfg(released("qwen2_moe", "qwen2-57b-a14b"));
  EXPECT_EQ(big.num_kv_heads, 4);
  EXPECT_EQ(big.shared_expert_intermediate_size, 20480);
  EXPECT_FALSE(parse_cfg(with_field(released("qwen2_moe", "qwen1.5-moe-a2.7b"), "qkv_bias", false)).attention_bias);
}

TEST(LlamaMoeConfig, Qwen2MoeRefusals) {
  const json q = released("qwen2_moe", "qwen1.5-moe-a2.7b");
  expect_error([&] { parse_cfg(with_field(q, "use_sliding_window", true)); }, {"'use_sliding_window'"});
  expect_error([&] { parse_cfg(with_field(q, "attention_bias", true)); }, {"'attention_bias'", "qkv_bias"});
  expect_error([&] { parse_cfg(with_field(q, "head_dim", 64)); }, {"'head_dim'"});
  json missing = q;
  missing.erase("shared_expert_intermediate_size");
  expect_error([&] { parse_cfg(missing); }, {"'shared_expert_intermediate_size'"});
  expect_error([&] { parse_cfg(with_field(q, "shared_expert_intermediate_size", 0)); }, {"'shared_expert_intermediate_size'"});
}

}  // namespace
}  // namespace tern
