#include "tern/format/model_config.h"

#include <gtest/gtest.h>

#include <limits>

#include "support/expect_error.h"
#include "support/temp_dir.h"
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

// Issue 16, reproduction 2: num_experts = 2^63-1 made `tern install` loop
// forever. Every count and dimension has a stated range, checked at parse.
TEST(ModelConfig, HugeCountsAreRefusedNamingFileAndField) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim",
                            "intermediate_size", "moe_intermediate_size", "num_experts", "decoder_sparse_step",
                            "max_position_embeddings"}) {
    json j = qwen3_config();
    j[field] = huge;
    expect_error([&] { parse_model_config(j, "m/config.json"); },
                 {"m/config.json: field '" + std::string(field) + "' must be in [", "got 9223372036854775807"});
  }
  json j = qwen3_config();
  j["num_experts"] = 9000;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'num_experts' must be in [0, 8192], got 9000"});
  j = qwen3_config();
  j["num_key_value_heads"] = 8;  // more than the 4 attention heads
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'num_key_value_heads' must be in [1, 4]"});
}

TEST(ModelConfig, NegativeAndUnsignedOverflowCountsAreRefused) {
  json j = qwen3_config();
  j["num_experts"] = -1;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'num_experts' must be in [0, 8192], got -1"});
  j = qwen3_config();
  j["hidden_size"] = 18446744073709551615ull;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'hidden_size' is out of range, got 18446744073709551615"});
  j = qwen3_config();
  j["mlp_only_layers"] = {0, 18446744073709551615ull};
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'mlp_only_layers' must be a list of integers"});
  j = qwen3_config();
  j["mlp_only_layers"] = json(std::vector<int64_t>(5, 0));
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'mlp_only_layers' lists 5 layers but the model has 4"});
}

TEST(ModelConfig, ProductsOfCountsAreBounded) {
  json j = qwen3_config();
  j["num_attention_heads"] = 1024;
  j["num_key_value_heads"] = 1024;
  j["head_dim"] = 1024;
  expect_error([&] { parse_model_config(j, "config.json"); },
               {"'head_dim' x num_attention_heads = 1048576 exceeds the limit 131072"});
  j = qwen3_config();
  j["num_hidden_layers"] = 1024;
  j["mlp_only_layers"] = json::array();
  j["num_experts"] = 8192;
  expect_error([&] { parse_model_config(j, "config.json"); },
               {"'num_experts' (8192) x MoE layers (1024) = 8388608 expert records exceeds the limit 262144"});
  // The largest released shapes are well inside the limits (Qwen3-235B-A22B).
  j = qwen3_config();
  j.update({{"vocab_size", 151936}, {"hidden_size", 4096}, {"num_hidden_layers", 94}, {"num_attention_heads", 64},
            {"num_key_value_heads", 4}, {"head_dim", 128}, {"intermediate_size", 12288},
            {"moe_intermediate_size", 1536}, {"num_experts", 128}, {"num_experts_per_tok", 8},
            {"mlp_only_layers", json::array()}, {"max_position_embeddings", 40960}});
  EXPECT_EQ(parse_model_config(j, "config.json").num_moe_layers(), 94);
}

TEST(ModelConfig, NonFiniteOrOutOfRangeFloatsAreRefused) {
  json j = qwen3_config();
  j["rope_theta"] = std::numeric_limits<double>::infinity();
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'rope_theta' must be a finite number"});
  j = qwen3_config();
  j["rms_norm_eps"] = 0.0;
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'rms_norm_eps' must be a finite number in (0, 1]"});
  j = qwen3_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 1e300}};
  expect_error([&] { parse_model_config(j, "config.json"); }, {"config.json rope_scaling: field 'factor'"});
  j = qwen3_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", -5}};
  expect_error([&] { parse_model_config(j, "config.json"); }, {"'original_max_position_embeddings' must be in [0,"});
}

TEST(ModelConfig, HugeValuesInErrorsAreCutShort) {
  json j = qwen3_config();
  j["hidden_size"] = std::string(100000, 'x');
  try {
    parse_model_config(j, "config.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
  }
}

TEST(ModelConfig, DeeplyNestedJsonIsRefusedBeforeParsing) {
  testing::TempDir dir;
  testing::write_bytes(dir / "config.json", "{\"model_type\": " + std::string(200000, '[') + std::string(200000, ']') + "}");
  expect_error([&] { load_model_config(dir.path()); }, {"config.json", "nested deeper than 128 levels"});
  // Brackets inside strings (even after an escaped quote) do not nest.
  testing::write_bytes(dir / "config.json", "{\"a\": \"" + std::string(200, '[') + "\\\"" + std::string(200, '{') +
                                                "\", \"model_type\": 5}");
  expect_error([&] { load_model_config(dir.path()); }, {"no \"model_type\" string"});
}

TEST(Architectures, Qwen3MoeDeclaresExpertsAndDenseLayers) {
  ModelConfig c = parse_model_config(qwen3_config(), "config.json");
  const ArchSpec& arch = find_arch("qwen3_moe");
  auto decls = arch.tensors(c);
  int experts = 0, dense_mlps = 0, lm_heads = 0;
  for (const auto& d : decls.tensors) {
    EXPECT_EQ(d.dim_fields.size(), d.shape.size()) << d.name << ": every dimension names its config field";
    if (d.is_expert) ++experts;
    if (d.name.find("mlp.gate_proj") != std::string::npos && !d.is_expert) ++dense_mlps;
    if (d.name == "lm_head.weight") ++lm_heads;
    if (d.name == "model.layers.0.self_attn.q_proj.weight") {
      EXPECT_EQ(d.shape, (std::vector<int64_t>{4 * 32, 64}));
    }
  }
  EXPECT_EQ(experts, 3 * 8 * 3);
  EXPECT_EQ(dense_mlps, 1);
  EXPECT_EQ(lm_heads, 0) << "tied embeddings have no lm_head";
  // One section per per-expert tensor, taken whole.
  ASSERT_EQ(decls.sections.size(), 3u * 8 * 3);
  const DeclIndex index = index_decls(decls.tensors);
  for (size_t i = 0; i < decls.sections.size(); ++i) {
    const SectionDecl& s = decls.sections[i];
    EXPECT_TRUE(c.layer_is_moe(s.layer));
    EXPECT_EQ(s.name, arch.expert_sections[i % 3]);
    EXPECT_EQ(s.source.expert_index, -1);
    const SourceGeometry g = section_source_geometry(s, index);
    EXPECT_EQ(g.tensor->shape, s.shape) << s.source.tensor;
  }
  EXPECT_EQ(decls.sections[3].source.tensor, "model.layers.0.mlp.experts.1.gate_proj.weight");
}

}  // namespace
}  // namespace tern
