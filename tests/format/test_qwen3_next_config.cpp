// config.json parsing of Qwen3-Next (qwen3_next): the released
// Qwen3-Next-80B-A3B config (synth's real-shape preset holds it) gives the
// hybrid layer pattern, the Gated DeltaNet shapes, the gated attention's
// partial rotary and the MoE fields; layer_types, when given, overrides
// full_attention_interval; what Tern cannot run is refused naming the field.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"
#include "tern/synth/presets.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

json qn_released() {
  return find_synth_preset("qwen3_next", "qwen3-next-80b-a3b").config;
}

json qn_with(json j, const std::string& key, json value) {
  if (value.is_null() && key.front() == '-')
    j.erase(key.substr(1));
  else
    j[key] = std::move(value);
  return j;
}

ModelConfig qn_parse(const json& j) {
  return parse_model_config(j, "config.json");
}

TEST(Qwen3NextConfig, AsReleased) {
  const ModelConfig c = qn_parse(qn_released());
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dim, 64);  // 256 x 0.25
  EXPECT_TRUE(c.attention_output_gate);
  EXPECT_TRUE(c.zero_centred_norms);
  EXPECT_TRUE(c.qk_norm);
  const ModelConfig::LinearAttention& la = c.linear_attention;
  EXPECT_EQ(la.num_key_heads, 16);
  EXPECT_EQ(la.num_value_heads, 32);
  EXPECT_EQ(la.key_head_dim, 128);
  EXPECT_EQ(la.value_head_dim, 128);
  EXPECT_EQ(la.conv_kernel, 4);
  EXPECT_EQ(la.conv_dim(), 8192);
  int linear = 0;
  for (int64_t l = 0; l < 48; ++l) {
    EXPECT_EQ(c.layer_is_linear(l), (l + 1) % 4 != 0) << l;
    linear += c.layer_is_linear(l) ? 1 : 0;
  }
  EXPECT_EQ(linear, 36);
  EXPECT_EQ(c.num_experts, 512);
  EXPECT_EQ(c.num_experts_per_tok, 10);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.num_moe_layers(), 48);
  EXPECT_EQ(c.rope_theta, 1e7);
}

TEST(Qwen3NextConfig, LayerTypesOverrideTheInterval) {
  json j = qn_with(qn_released(), "num_hidden_layers", 3);
  j["layer_types"] = {"full_attention", "linear_attention", "full_attention"};
  const ModelConfig c = qn_parse(j);
  EXPECT_FALSE(c.layer_is_linear(0));
  EXPECT_TRUE(c.layer_is_linear(1));
  EXPECT_FALSE(c.layer_is_linear(2));
  const ModelConfig every2 = qn_parse(
      qn_with(qn_with(qn_released(), "num_hidden_layers", 4), "full_attention_interval", 2));
  EXPECT_TRUE(every2.layer_is_linear(0));
  EXPECT_FALSE(every2.layer_is_linear(1));
  EXPECT_TRUE(every2.layer_is_linear(2));
  EXPECT_FALSE(every2.layer_is_linear(3));
}

TEST(Qwen3NextConfig, RefusesWhatItCannotRun) {
  expect_error([&] { qn_parse(qn_with(qn_released(), "linear_num_value_heads", 24)); },
               {"linear_num_value_heads' (24) is not a multiple of linear_num_key_heads (16)"});
  expect_error([&] { qn_parse(qn_with(qn_released(), "partial_rotary_factor", 0.0039)); },
               {"partial_rotary_factor"});
  expect_error(
      [&] { qn_parse(qn_with(qn_released(), "layer_types", json::array({"linear_attention"}))); },
      {"layer_types' has 1 entries but num_hidden_layers is 48"});
  json bad_type = qn_released();
  bad_type["layer_types"] = json::array();
  for (int l = 0; l < 48; ++l)
    bad_type["layer_types"].push_back(l == 5 ? "sliding_attention" : "full_attention");
  expect_error([&] { qn_parse(bad_type); }, {"entry 5 is \"sliding_attention\""});
  expect_error([&] { qn_parse(qn_with(qn_released(), "linear_conv_kernel_dim", 0)); },
               {"linear_conv_kernel_dim"});
  expect_error([&] { qn_parse(qn_with(qn_released(), "use_sliding_window", true)); },
               {"use_sliding_window"});
  expect_error([&] { qn_parse(qn_with(qn_released(), "-head_dim", nullptr)); },
               {"head_dim' is missing"});
  expect_error(
      [&] {
        qn_parse(qn_with(qn_released(), "rope_scaling", json{{"type", "yarn"}, {"factor", 4}}));
      },
      {"rope_scaling"});
  expect_error([&] { qn_parse(qn_with(qn_released(), "hidden_act", "gelu")); }, {"hidden_act"});
}

// Its checkpoint map: Gated DeltaNet tensors on linear layers, gated q_proj
// (2 x heads x head_dim rows) on full ones, conv taps as a 3-D tensor; no
// mtp.* tensor is declared (transformers ignores them).
TEST(Qwen3NextConfig, DeclaresTheCheckpointsTensors) {
  const ModelConfig c = qn_parse(qn_released());
  const CheckpointDecls d = find_arch("qwen3_next").tensors(c);
  const DeclIndex index = index_decls(d.tensors);
  ASSERT_TRUE(index.count("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  EXPECT_EQ(index.at("model.layers.0.linear_attn.in_proj_qkvz.weight")->shape,
            (std::vector<int64_t>{12288, 2048}));
  EXPECT_EQ(index.at("model.layers.0.linear_attn.in_proj_ba.weight")->shape,
            (std::vector<int64_t>{64, 2048}));
  EXPECT_EQ(index.at("model.layers.0.linear_attn.conv1d.weight")->shape,
            (std::vector<int64_t>{8192, 1, 4}));
  EXPECT_EQ(index.at("model.layers.0.linear_attn.out_proj.weight")->shape,
            (std::vector<int64_t>{2048, 4096}));
  EXPECT_EQ(index.at("model.layers.3.self_attn.q_proj.weight")->shape,
            (std::vector<int64_t>{8192, 2048}));
  EXPECT_EQ(index.at("model.layers.3.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{512, 2048}));
  EXPECT_FALSE(index.count("model.layers.3.linear_attn.in_proj_qkvz.weight"));
  EXPECT_FALSE(index.count("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(index.count("model.layers.47.mlp.shared_expert_gate.weight"));
  EXPECT_EQ(d.sections.size(), size_t{48} * 512 * 3);
  for (const auto& t : d.tensors) EXPECT_NE(t.name.rfind("mtp.", 0), 0u) << t.name;
}

}  // namespace
}  // namespace tern
