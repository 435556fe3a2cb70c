// gpt_oss config.json parsing (docs/gpt_oss_facts.md §1) and its tensor
// declarations in both checkpoint layouts (§2).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;

// The released gpt-oss-20b config.json, verbatim values.
json gpt_oss_20b() {
  json types = json::array();
  for (int l = 0; l < 24; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  return {{"architectures", {"GptOssForCausalLM"}},
          {"attention_bias", true},
          {"attention_dropout", 0.0},
          {"eos_token_id", 200002},
          {"experts_per_token", 4},
          {"head_dim", 64},
          {"hidden_act", "silu"},
          {"hidden_size", 2880},
          {"initial_context_length", 4096},
          {"initializer_range", 0.02},
          {"intermediate_size", 2880},
          {"layer_types", types},
          {"max_position_embeddings", 131072},
          {"model_type", "gpt_oss"},
          {"num_attention_heads", 64},
          {"num_experts_per_tok", 4},
          {"num_hidden_layers", 24},
          {"num_key_value_heads", 8},
          {"num_local_experts", 32},
          {"output_router_logits", false},
          {"pad_token_id", 199999},
          {"quantization_config",
           {{"modules_to_not_convert",
             {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
            {"quant_method", "mxfp4"}}},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"factor", 32.0},
            {"original_max_position_embeddings", 4096},
            {"rope_type", "yarn"},
            {"truncate", false}}},
          {"rope_theta", 150000},
          {"router_aux_loss_coef", 0.9},
          {"sliding_window", 128},
          {"swiglu_limit", 7.0},
          {"tie_word_embeddings", false},
          {"transformers_version", "4.55.0.dev0"},
          {"use_cache", true},
          {"vocab_size", 201088}};
}

// A small config with only what has no GptOssConfig default.
json minimal() {
  return {{"model_type", "gpt_oss"},  {"vocab_size", 300},          {"hidden_size", 64},
          {"num_hidden_layers", 3},   {"num_attention_heads", 4},   {"num_key_value_heads", 2},
          {"head_dim", 16},           {"intermediate_size", 32},    {"num_local_experts", 4}};
}

ModelConfig parse(const json& j) { return parse_model_config(j, "config.json"); }

TEST(GptOssConfig, ParsesTheReleasedGptOss20bConfig) {
  ModelConfig c = parse(gpt_oss_20b());
  EXPECT_EQ(c.architecture, "gpt_oss");
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.hidden_size, 2880);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64) << "hidden_size 2880 != heads x head_dim 4096";
  EXPECT_TRUE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling->beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->beta_slow, 1.0);
  EXPECT_FALSE(c.rope_scaling->truncate);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_EQ(c.intermediate_size, 0) << "no dense MLP";
  EXPECT_EQ(c.num_moe_layers(), 24);
  for (int64_t l = 0; l < 24; ++l) {
    EXPECT_TRUE(c.layer_is_moe(l)) << l;
    EXPECT_EQ(c.layer_is_sliding(l), l % 2 == 0) << l;
  }
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 7.0);
  EXPECT_DOUBLE_EQ(c.swiglu_alpha, 1.702);
}

TEST(GptOssConfig, Gpt120bHasThirtySixLayersOf128Experts) {
  json j = gpt_oss_20b();
  j["num_hidden_layers"] = 36;
  j["num_local_experts"] = 128;
  j["layer_types"] = json::array();
  for (int l = 0; l < 36; ++l) j["layer_types"].push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  ModelConfig c = parse(j);
  EXPECT_EQ(c.num_moe_layers() * c.num_experts, 4608);
}

TEST(GptOssConfig, MissingFieldsTakeGptOssConfigDefaults) {
  ModelConfig c = parse(minimal());
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_TRUE(c.layer_is_sliding(0));
  EXPECT_FALSE(c.layer_is_sliding(1));
  EXPECT_TRUE(c.layer_is_sliding(2)) << "without layer_types even layers slide, as transformers";
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 7.0);
  EXPECT_DOUBLE_EQ(c.swiglu_alpha, 1.702);
}

TEST(GptOssConfig, ReadsOptionalFields) {
  json j = minimal();
  j["experts_per_token"] = 2;  // OpenAI's name alone
  j["swiglu_limit"] = 5.5;
  j["swiglu_alpha"] = 1.5;
  j["sliding_window"] = 8;
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  j["max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 512}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 5.5);
  EXPECT_DOUBLE_EQ(c.swiglu_alpha, 1.5);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_FALSE(c.layer_is_sliding(0));
  EXPECT_TRUE(c.layer_is_sliding(1));
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_TRUE(c.rope_scaling->truncate) << "transformers truncates unless told not to";
  j["layer_types"] = {"full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(parse(j).num_moe_layers(), 3);
  EXPECT_FALSE(parse(j).layer_is_sliding(1));
  j["sliding_window"] = nullptr;  // fine when no layer slides
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_FALSE(parse(j).rope_scaling.has_value());
}

TEST(GptOssConfig, EveryErrorNamesFileAndField) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {[](json& j) { j["layer_types"] = {"sliding_attention", "full_attention"}; },
       {"config.json", "'layer_types'", "has 2 entries but num_hidden_layers is 3"}},
      {[](json& j) { j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"}; },
       {"config.json", "'layer_types'", "entry 1", "chunked_attention"}},
      {[](json& j) { j["layer_types"] = {"sliding_attention", 7, "full_attention"}; },
       {"'layer_types'", "must be a list of strings"}},
      {[](json& j) { j["num_experts_per_tok"] = 5; }, {"'num_experts_per_tok'", "(5) exceeds num_local_experts (4)"}},
      {[](json& j) { j["experts_per_token"] = 9; }, {"'experts_per_token'", "(9) exceeds num_local_experts (4)"}},
      {[](json& j) {
         j["num_experts_per_tok"] = 2;
         j["experts_per_token"] = 3;
       },
       {"'experts_per_token'", "(3) differs from num_experts_per_tok (2)"}},
      {[](json& j) { j["num_experts_per_tok"] = 0; }, {"'num_experts_per_tok'", "must be positive"}},
      {[](json& j) { j.erase("num_local_experts"); }, {"config.json", "'num_local_experts'", "is missing", "gpt_oss"}},
      {[](json& j) { j.erase("intermediate_size"); }, {"'intermediate_size'", "is missing"}},
      {[](json& j) { j.erase("hidden_size"); }, {"'hidden_size'", "is missing"}},
      {[](json& j) { j.erase("vocab_size"); }, {"'vocab_size'", "is missing"}},
      {[](json& j) { j["num_local_experts"] = int64_t{1} << 40; }, {"'num_local_experts'", "must be in [1, 8192]"}},
      {[](json& j) { j["attention_bias"] = false; }, {"'attention_bias'", "always has q/k/v/o biases"}},
      {[](json& j) { j["hidden_act"] = "gelu"; }, {"'hidden_act'", "gelu"}},
      {[](json& j) { j["hidden_size"] = 48; }, {"'hidden_size'", "multiple of 32"}},
      {[](json& j) { j["intermediate_size"] = 40; }, {"'intermediate_size'", "multiple of 32"}},
      {[](json& j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; },
       {"'rope_scaling'", "linear", "yarn"}},
      {[](json& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 16.0}, {"original_max_position_embeddings", 4096}};
       },
       {"'rope_scaling'", "factor 16", "= 32", "disagree"}},
      {[](json& j) { j["quantization_config"] = {{"quant_method", "bitsandbytes"}}; },
       {"'quantization_config'", "bitsandbytes", "mxfp4"}},
      {[](json& j) { j["sliding_window"] = nullptr; }, {"'sliding_window'", "is null", "sliding_attention"}},
      {[](json& j) { j["sliding_window"] = 0; }, {"'sliding_window'", "must be in [1,"}},
      {[](json& j) { j["swiglu_limit"] = -1.0; }, {"'swiglu_limit'", "finite number"}},
      {[](json& j) { j["partial_rotary_factor"] = 0.5; }, {"'partial_rotary_factor'"}},
  };
  for (const Case& c : cases) {
    json j = minimal();
    c.edit(j);
    SCOPED_TRACE(j.dump());
    try {
      parse(j);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const std::string& p : c.parts) EXPECT_NE(what.find(p), std::string::npos) << what << "\n  lacks: " << p;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(GptOssArch, BothLayoutsShareTrunkAndSectionsAndDifferOnlyInExpertSources) {
  ModelConfig c = parse(gpt_oss_20b());
  const ArchSpec& arch = find_arch("gpt_oss");
  ASSERT_EQ(arch.layouts, (std::vector<std::string_view>{"mxfp4", "float"}));
  EXPECT_EQ(arch.expert_sections,
            (std::vector<std::string>{"gate", "up", "down", "gate_bias", "up_bias", "down_bias"}));
  const CheckpointDecls mx = arch.tensors(c, 0), fl = arch.tensors(c, 1);
  std::vector<std::string> mx_trunk, fl_trunk;
  for (const auto& d : mx.tensors)
    if (!d.is_expert) mx_trunk.push_back(d.name);
  for (const auto& d : fl.tensors)
    if (!d.is_expert) fl_trunk.push_back(d.name);
  EXPECT_EQ(mx_trunk, fl_trunk);
  EXPECT_EQ(mx_trunk.size(), 1u + 24u * 13u + 2u);
  ASSERT_EQ(mx.sections.size(), 24u * 32u * 6u);
  ASSERT_EQ(fl.sections.size(), mx.sections.size());
  for (size_t i = 0; i < mx.sections.size(); ++i) {
    EXPECT_EQ(mx.sections[i].name, fl.sections[i].name);
    EXPECT_EQ(mx.sections[i].shape, fl.sections[i].shape);
    EXPECT_EQ(mx.sections[i].layer, fl.sections[i].layer);
    EXPECT_EQ(mx.sections[i].expert, fl.sections[i].expert);
  }
  // Every section's source is consistent with its declaration (in both layouts).
  for (const CheckpointDecls* d : {&mx, &fl}) {
    const DeclIndex index = index_decls(d->tensors);
    for (const SectionDecl& s : d->sections) EXPECT_NO_THROW(section_source_geometry(s, index)) << s.name;
    for (const TensorDecl& t : d->tensors) EXPECT_EQ(t.dim_fields.size(), t.shape.size()) << t.name;
  }
}

TEST(GptOssArch, DeclaresTheReleasedTensorsAndSections) {
  ModelConfig c = parse(gpt_oss_20b());
  const ArchSpec& arch = find_arch("gpt_oss");
  const CheckpointDecls mx = arch.tensors(c, 0), fl = arch.tensors(c, 1);
  auto shape_of = [](const CheckpointDecls& d, const std::string& name) {
    for (const auto& t : d.tensors)
      if (t.name == name) return t.shape;
    ADD_FAILURE() << "no tensor " << name;
    return std::vector<int64_t>{};
  };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape_of(mx, "model.embed_tokens.weight"), (S{201088, 2880}));
  EXPECT_EQ(shape_of(mx, "lm_head.weight"), (S{201088, 2880}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.q_proj.weight"), (S{4096, 2880}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.q_proj.bias"), (S{4096}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.k_proj.weight"), (S{512, 2880}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.o_proj.weight"), (S{2880, 4096}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.o_proj.bias"), (S{2880}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.self_attn.sinks"), (S{64}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.router.weight"), (S{32, 2880}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.router.bias"), (S{32}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.gate_up_proj_blocks"), (S{32, 5760, 90, 16}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.gate_up_proj_scales"), (S{32, 5760, 90}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.gate_up_proj_bias"), (S{32, 5760}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.down_proj_blocks"), (S{32, 2880, 90, 16}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.down_proj_scales"), (S{32, 2880, 90}));
  EXPECT_EQ(shape_of(mx, "model.layers.3.mlp.experts.down_proj_bias"), (S{32, 2880}));
  EXPECT_EQ(shape_of(fl, "model.layers.3.mlp.experts.gate_up_proj"), (S{32, 2880, 5760}));
  EXPECT_EQ(shape_of(fl, "model.layers.3.mlp.experts.down_proj"), (S{32, 2880, 2880}));

  // Layer 3, expert 5: gate = even rows, up = odd rows of the fused
  // projection; the float layout is stored [in, out].
  const size_t first = (3 * 32 + 5) * 6;
  const SectionDecl& gate = mx.sections[first];
  EXPECT_EQ(gate.layer, 3);
  EXPECT_EQ(gate.expert, 5);
  EXPECT_EQ(gate.name, "gate");
  EXPECT_EQ(gate.shape, (S{2880, 2880}));
  EXPECT_EQ(gate.source.tensor, "model.layers.3.mlp.experts.gate_up_proj_blocks");
  EXPECT_EQ(gate.source.scales, "model.layers.3.mlp.experts.gate_up_proj_scales");
  EXPECT_EQ(gate.source.expert_index, 5);
  EXPECT_EQ(gate.source.row_start, 0);
  EXPECT_EQ(gate.source.row_step, 2);
  const SectionDecl& up = mx.sections[first + 1];
  EXPECT_EQ(up.source.row_start, 1);
  EXPECT_EQ(up.source.row_step, 2);
  const SectionDecl& down = fl.sections[first + 2];
  EXPECT_EQ(down.source.tensor, "model.layers.3.mlp.experts.down_proj");
  EXPECT_TRUE(down.source.transposed);
  EXPECT_EQ(down.source.row_step, 1);
  const SectionDecl& up_bias = fl.sections[first + 4];
  EXPECT_EQ(up_bias.shape, (S{2880}));
  EXPECT_EQ(up_bias.source.tensor, "model.layers.3.mlp.experts.gate_up_proj_bias");
  EXPECT_EQ(up_bias.source.row_start, 1);
  EXPECT_EQ(up_bias.source.row_step, 2);
  const DeclIndex index = index_decls(fl.tensors);
  const SourceGeometry g = section_source_geometry(fl.sections[first], index);
  EXPECT_EQ(g.out, 5760);
  EXPECT_EQ(g.in, 2880);
  EXPECT_EQ(g.slices, 32);
}

TEST(GptOssArch, InconsistentSectionSourcesAreRefused) {
  ModelConfig c = parse(minimal());
  const CheckpointDecls d = find_arch("gpt_oss").tensors(c, 0);
  const DeclIndex index = index_decls(d.tensors);
  SectionDecl s = d.sections[1];  // up of (0, 0): rows 1, 3, ..., 63 of 64
  s.source.row_start = 2;
  expect_error([&] { section_source_geometry(s, index); }, {"'up'", "outside the 64 rows"});
  s = d.sections[0];
  s.source.expert_index = 4;
  expect_error([&] { section_source_geometry(s, index); }, {"expert index 4 outside"});
  s = d.sections[0];
  s.source.tensor = "model.embed_tokens.weight";
  expect_error([&] { section_source_geometry(s, index); }, {"is not an expert tensor"});
  s = d.sections[0];
  s.source.scales = "model.layers.0.mlp.experts.gate_up_proj_bias";
  expect_error([&] { section_source_geometry(s, index); }, {"is not MXFP4 scales"});
  s = d.sections[2];  // down [64, 32]
  s.shape = {64, 64};
  expect_error([&] { section_source_geometry(s, index); }, {"rows of 64 elements", "rows of 32"});
}

}  // namespace
}  // namespace tern
