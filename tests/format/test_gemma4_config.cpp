// config.json parsing of Gemma 4 (gemma4, gemma4_text): the released
// gemma-4-26B-A4B text config (synth's real-shape preset holds it), read
// from the multimodal config.json's text_config or flat, gives the two layer
// types' attention shapes, the proportional RoPE's rotated pairs, the
// sandwich layer's fields and the MoE; what Tern cannot run is refused
// naming the field.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"
#include "tern/synth/presets.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

json g4_text() { return find_synth_preset("gemma4", "gemma4-26b-a4b").config; }

// The multimodal wrapper around a text config, as the release ships it.
json g4_multimodal(json text) {
  return {{"model_type", "gemma4"},
          {"architectures", {"Gemma4ForConditionalGeneration"}},
          {"text_config", std::move(text)},
          {"vision_config", {{"model_type", "gemma4_vision"}}}};
}

json g4_with(json j, const std::string& key, json value) {
  if (value.is_null() && key.front() == '-')
    j.erase(key.substr(1));
  else
    j[key] = std::move(value);
  return j;
}

ModelConfig g4_parse(const json& j) { return parse_model_config(j, "config.json"); }

TEST(Gemma4Config, AsReleasedMultimodal) {
  const ModelConfig c = g4_parse(g4_multimodal(g4_text()));
  EXPECT_EQ(c.architecture, "gemma4");
  EXPECT_EQ(c.weight_prefix, "model.language_model.");
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 2816);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.global_head_dim, 512);
  EXPECT_TRUE(c.attention_k_eq_v);
  EXPECT_EQ(c.sliding_window, 1024);
  int full = 0;
  for (int64_t l = 0; l < 30; ++l) {
    const bool is_full = (l + 1) % 6 == 0;
    full += is_full ? 1 : 0;
    EXPECT_EQ(c.layer_is_sliding(l), !is_full) << l;
    EXPECT_EQ(c.layer_head_dim(l), is_full ? 512 : 256) << l;
    EXPECT_EQ(c.layer_kv_heads(l), is_full ? 2 : 8) << l;
    EXPECT_EQ(c.layer_values_are_keys(l), is_full) << l;
  }
  EXPECT_EQ(full, 5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.full_rope_theta, 1000000.0);
  EXPECT_EQ(c.full_rotary_pairs, 64);  // 0.25 x 512 / 2 of 256 pairs
  EXPECT_TRUE(c.sandwich_norms);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.embedding_scale, static_cast<float>(std::sqrt(2816.0)));  // no dtype given: float32
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 704);
  EXPECT_EQ(c.intermediate_size, 2112);
  EXPECT_EQ(c.num_moe_layers(), 30);
}

// transformers scales the embeddings by sqrt(hidden) cast to the weights' dtype, so a bfloat16
// release multiplies by 53.0, not 53.066; the dtype may sit in text_config or only at the top level.
TEST(Gemma4Config, EmbeddingScaleIsRoundedToTheCheckpointDtype) {
  EXPECT_DOUBLE_EQ(g4_parse(g4_with(g4_text(), "dtype", "bfloat16")).embedding_scale, 53.0);
  EXPECT_DOUBLE_EQ(g4_parse(g4_with(g4_text(), "torch_dtype", "float16")).embedding_scale, 53.0625);
  EXPECT_DOUBLE_EQ(g4_parse(g4_with(g4_text(), "torch_dtype", "float32")).embedding_scale,
                   static_cast<float>(std::sqrt(2816.0)));
  EXPECT_DOUBLE_EQ(g4_parse(g4_with(g4_multimodal(g4_text()), "dtype", "bfloat16")).embedding_scale, 53.0);
  json both = g4_multimodal(g4_with(g4_text(), "dtype", "float32"));
  both["dtype"] = "bfloat16";  // text_config's own dtype wins
  EXPECT_DOUBLE_EQ(g4_parse(both).embedding_scale, static_cast<float>(std::sqrt(2816.0)));
}

TEST(Gemma4Config, TextOnlyLayoutReadsTheSameFields) {
  const ModelConfig flat = g4_parse(g4_text());
  const ModelConfig mm = g4_parse(g4_multimodal(g4_text()));
  EXPECT_EQ(flat.architecture, "gemma4_text");
  EXPECT_TRUE(flat.weight_prefix.empty());
  EXPECT_EQ(flat.num_layers, mm.num_layers);
  EXPECT_EQ(flat.sliding_layers, mm.sliding_layers);
  EXPECT_EQ(flat.full_rotary_pairs, mm.full_rotary_pairs);
  // Both layouts declare the same tensors (the multimodal one's are renamed
  // when read).
  const CheckpointDecls a = find_arch("gemma4_text").tensors(flat), b = find_arch("gemma4").tensors(mm);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
}

TEST(Gemma4Config, FullLayersWithoutKEqVKeepTheirValuesAndKvHeads) {
  const ModelConfig c = g4_parse(g4_with(g4_text(), "attention_k_eq_v", false));
  EXPECT_FALSE(c.layer_values_are_keys(5));
  EXPECT_EQ(c.layer_kv_heads(5), 8);  // num_global_key_value_heads only applies with k_eq_v
  EXPECT_EQ(c.layer_head_dim(5), 512);
  const CheckpointDecls d = find_arch("gemma4_text").tensors(c);
  bool v5 = false;
  for (const TensorDecl& t : d.tensors) v5 = v5 || t.name == "model.layers.5.self_attn.v_proj.weight";
  EXPECT_TRUE(v5);
  const ModelConfig k = g4_parse(g4_text());
  for (const TensorDecl& t : find_arch("gemma4_text").tensors(k).tensors)
    EXPECT_NE(t.name, "model.layers.5.self_attn.v_proj.weight");
}

TEST(Gemma4Config, LayerTypesDefaultToFiveSlidingOneFullAndTheLastIsFull) {
  json j = g4_with(g4_text(), "-layer_types", nullptr);
  j["num_hidden_layers"] = 8;
  const ModelConfig c = g4_parse(j);
  for (int64_t l = 0; l < 8; ++l) EXPECT_EQ(c.layer_is_sliding(l), l != 5 && l != 7) << l;
  json all_sliding = g4_text();
  all_sliding["num_hidden_layers"] = 2;
  all_sliding["layer_types"] = {"sliding_attention", "sliding_attention"};
  EXPECT_FALSE(g4_parse(all_sliding).layer_is_sliding(1));  // forced full, as transformers does
}

TEST(Gemma4Config, ProportionalRopeDefaultsAndAPlainFullRope) {
  json j = g4_with(g4_text(), "-rope_parameters", nullptr);
  const ModelConfig c = g4_parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.full_rope_theta, 1000000.0);
  EXPECT_EQ(c.full_rotary_pairs, 64);
  json d = g4_text();
  d["rope_parameters"]["full_attention"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  EXPECT_EQ(g4_parse(d).full_rotary_pairs, 256);
}

TEST(Gemma4Config, RefusesWhatTernCannotRun) {
  expect_error([] { g4_parse(g4_with(g4_text(), "hidden_size_per_layer_input", 256)); },
               {"hidden_size_per_layer_input"});
  expect_error([] { g4_parse(g4_with(g4_text(), "-hidden_size_per_layer_input", nullptr)); },
               {"hidden_size_per_layer_input"});
  // an explicit null turns per-layer embeddings off as 0 does (transformers: `if not ...`)
  json ple_null = g4_text();
  ple_null["hidden_size_per_layer_input"] = nullptr;
  EXPECT_NO_THROW(g4_parse(ple_null));
  expect_error([] { g4_parse(g4_with(g4_text(), "num_kv_shared_layers", 4)); }, {"num_kv_shared_layers"});
  expect_error([] { g4_parse(g4_with(g4_text(), "enable_moe_block", false)); }, {"enable_moe_block"});
  expect_error([] { g4_parse(g4_with(g4_text(), "hidden_activation", "silu")); }, {"hidden_activation"});
  expect_error([] { g4_parse(g4_with(g4_text(), "use_bidirectional_attention", "vision")); },
               {"use_bidirectional_attention"});
  expect_error([] { g4_parse(g4_with(g4_text(), "-head_dim", nullptr)); }, {"head_dim"});
  expect_error([] { g4_parse(g4_with(g4_text(), "num_global_key_value_heads", 3)); }, {"num_global_key_value_heads"});
  expect_error([] { g4_parse(g4_with(g4_text(), "global_head_dim", 511)); }, {"global_head_dim"});
  expect_error([] { g4_parse(g4_with(g4_text(), "layer_types", json::array({"sliding_attention"}))); },
               {"layer_types"});
  json yarn = g4_text();
  yarn["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
  expect_error([&] { g4_parse(yarn); }, {"rope_type"});
  json rope_bad = g4_text();
  rope_bad["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.0;
  expect_error([&] { g4_parse(rope_bad); }, {"partial_rotary_factor"});
  json scaled = g4_text();  // proportional RoPE divides its frequencies by factor; only 1 is supported
  scaled["rope_parameters"]["full_attention"]["factor"] = 8.0;
  expect_error([&] { g4_parse(scaled); }, {"factor"});
  scaled["rope_parameters"]["full_attention"]["factor"] = 1.0;
  EXPECT_NO_THROW(g4_parse(scaled));
  expect_error([] { g4_parse({{"model_type", "gemma4"}}); }, {"text_config"});
  expect_error([] { g4_parse(g4_multimodal(g4_with(g4_text(), "-num_experts", nullptr))); }, {"num_experts"});
}

}  // namespace
}  // namespace tern
