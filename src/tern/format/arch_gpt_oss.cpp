// GPT-OSS (model_type "gpt_oss"; gpt-oss-20b, gpt-oss-120b). Facts and
// sources: docs/gpt_oss_facts.md. A Llama-style decoder with biased q/k/v/o,
// one learned sink logit per query head, sliding-window attention on the
// layers `layer_types` marks (even layers as released), YaRN RoPE, and a
// routed mixture of experts in every layer (top-k over router logits + bias,
// softmax over the k, clamped SwiGLU with biases).
//
// Experts come fused over a layer's E experts, gate and up interleaved
// (fused output 2j is gate unit j, 2j + 1 is up unit j), in two layouts:
//   "mxfp4" (as released): gate_up_proj_blocks U8 [E, 2I, H/32, 16] +
//           _scales U8 [E, 2I, H/32], down_proj_blocks [E, H, I/32, 16] +
//           _scales [E, H, I/32]; rows are output features;
//   "float" (dequantized): gate_up_proj [E, H, 2I], down_proj [E, I, H],
//           stored [in, out];
// plus gate_up_proj_bias [E, 2I] and down_proj_bias [E, H] in both. Each
// expert record holds gate [I, H], up [I, H], down [H, I] and the F32
// biases gate_bias [I], up_bias [I], down_bias [H].
#include <algorithm>
#include <cmath>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

// The config.json fields behind each dimension (TensorDecl::dim_fields).
constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kHeads = "num_attention_heads",
                           kExperts = "num_local_experts", kFfn = "intermediate_size",
                           kFfn2 = "2 x intermediate_size", kHidden32 = "hidden_size / 32",
                           kFfn32 = "intermediate_size / 32", kBlock = "16 (bytes per MXFP4 block)";

// Defaults of transformers' GptOssConfig, where config.json may omit a field.
constexpr int64_t kDefaultSlidingWindow = 128;
constexpr int64_t kDefaultTopK = 4;
constexpr double kDefaultSwigluLimit = 7.0, kDefaultSwigluAlpha = 1.702;


void parse_gpt_oss(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  // gpt_oss's own defaults where read_decoder_fields has Llama's.
  cfg.attention_bias = r.get_bool("attention_bias", true);
  if (!cfg.attention_bias) r.invalid("attention_bias", "is false; gpt_oss attention always has q/k/v/o biases");
  cfg.rms_norm_eps = r.get_double("rms_norm_eps", 1e-5);
  r.require_finite("rms_norm_eps", cfg.rms_norm_eps, 0.0, 1.0);
  cfg.rope_theta = r.get_double("rope_theta", 150000.0);
  r.require_finite("rope_theta", cfg.rope_theta, 0.0, 1e15);
  cfg.max_position_embeddings = r.get_int("max_position_embeddings", 131072);
  r.require_range("max_position_embeddings", cfg.max_position_embeddings, 1, lim::kMaxPositions);

  const std::string act = r.get_string("hidden_act", "silu");
  if (act != "silu") r.invalid("hidden_act", fmt::format("is {}; gpt_oss experts use silu", json_excerpt(act)));
  if (r.has("partial_rotary_factor") && r.get_double("partial_rotary_factor") != 1.0)
    r.invalid("partial_rotary_factor", "must be 1 for gpt_oss (RoPE covers the whole head)");
  if (cfg.rope_scaling) {
    const RopeScalingConfig& s = *cfg.rope_scaling;
    if (s.type != "yarn" && s.type != "default")
      r.invalid("rope_scaling", fmt::format("has type {}; Tern runs gpt_oss with yarn or no scaling",
                                            json_excerpt(s.type)));
    if (s.type == "default") {
      cfg.rope_scaling.reset();
    } else if (s.original_max_position_embeddings > 0) {
      // transformers v4.5x uses max_position_embeddings / original instead of
      // factor, OpenAI's code and transformers v5 use factor: refuse a config
      // on which they disagree (docs/gpt_oss_facts.md §4.5).
      const double implied = static_cast<double>(cfg.max_position_embeddings) /
                             static_cast<double>(s.original_max_position_embeddings);
      if (std::abs(implied - s.factor) > 1e-9 * std::max(1.0, s.factor))
        r.invalid("rope_scaling",
                  fmt::format("factor {} differs from max_position_embeddings / original_max_position_embeddings "
                              "= {}; transformers versions disagree on which one YaRN uses",
                              s.factor, implied));
    }
  }

  // Every layer routes to experts; there is no dense MLP.
  cfg.num_experts = r.get_int("num_local_experts");
  r.require_range("num_local_experts", cfg.num_experts, 1, lim::kMaxExperts);
  const bool has_topk = r.has("num_experts_per_tok"), has_oai_topk = r.has("experts_per_token");
  const int64_t topk = r.get_int("num_experts_per_tok", kDefaultTopK);
  const int64_t oai_topk = r.get_int("experts_per_token", topk);
  if (has_topk && has_oai_topk && topk != oai_topk)
    r.invalid("experts_per_token", fmt::format("({}) differs from num_experts_per_tok ({})", oai_topk, topk));
  cfg.num_experts_per_tok = has_topk ? topk : oai_topk;
  const std::string topk_field = has_topk || !has_oai_topk ? "num_experts_per_tok" : "experts_per_token";
  r.require_positive(topk_field, cfg.num_experts_per_tok);
  if (cfg.num_experts_per_tok > cfg.num_experts)
    r.invalid(topk_field, fmt::format("({}) exceeds num_local_experts ({})", cfg.num_experts_per_tok, cfg.num_experts));
  cfg.moe_intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
  cfg.intermediate_size = 0;
  cfg.decoder_sparse_step = 1;
  cfg.mlp_only_layers.clear();
  // Softmax over the top-k logits = softmax over all, then renormalised over the top k.
  cfg.norm_topk_prob = true;
  // MXFP4 blocks run along the input dimension of every expert matrix.
  if (cfg.hidden_size % 32 != 0)
    r.invalid("hidden_size", fmt::format("({}) must be a multiple of 32 (MXFP4 blocks of gpt_oss experts)", cfg.hidden_size));
  if (cfg.moe_intermediate_size % 32 != 0)
    r.invalid("intermediate_size",
              fmt::format("({}) must be a multiple of 32 (MXFP4 blocks of gpt_oss experts)", cfg.moe_intermediate_size));
  if (r.has("quantization_config")) {
    const nlohmann::json& q = r.raw()["quantization_config"];
    if (!q.is_object() || !q.contains("quant_method") || q["quant_method"] != "mxfp4")
      r.invalid("quantization_config",
                fmt::format("is {}; Tern reads gpt_oss experts as MXFP4 (quant_method \"mxfp4\") or float",
                            json_excerpt(q)));
  }

  cfg.swiglu_limit = r.get_double("swiglu_limit", kDefaultSwigluLimit);
  r.require_finite("swiglu_limit", cfg.swiglu_limit, 0.0, 1e6);
  cfg.swiglu_alpha = r.get_double("swiglu_alpha", kDefaultSwigluAlpha);
  r.require_finite("swiglu_alpha", cfg.swiglu_alpha, 0.0, 1e6);
  cfg.attention_sinks = true;

  // Sliding window: layer_types as given, else as transformers' GptOssConfig
  // (layer 0 slides, then every other layer).
  read_sliding_layer_types(r, cfg, [](int64_t l) { return l % 2 == 0; });
  const bool any_sliding = std::find(cfg.sliding_layers.begin(), cfg.sliding_layers.end(), true) != cfg.sliding_layers.end();
  const bool window_null = r.raw().contains("sliding_window") && r.raw()["sliding_window"].is_null();
  if (window_null) {
    if (any_sliding) r.invalid("sliding_window", "is null but layer_types has sliding_attention layers");
    cfg.sliding_window = 0;
  } else {
    cfg.sliding_window = r.get_int("sliding_window", kDefaultSlidingWindow);
    r.require_range("sliding_window", cfg.sliding_window, 1, lim::kMaxPositions);
  }
  if (!any_sliding) cfg.sliding_layers.clear();
}

// Layouts (ArchSpec::layouts, same order).
enum Layout : size_t { kMxfp4 = 0, kFloat = 1 };

CheckpointDecls gpt_oss_tensors(const ModelConfig& c, size_t layout) {
  if (layout != kMxfp4 && layout != kFloat) fail("gpt_oss: no checkpoint layout {}", layout);
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, true, true);
    t.push_back(tensor_decl(p + "self_attn.sinks", {c.num_heads}, {kHeads}, WeightInit::Logit));
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "mlp.router.weight", {E, H}, {kExperts, kHidden}, WeightInit::Router));
    t.push_back(tensor_decl(p + "mlp.router.bias", {E}, {kExperts}, WeightInit::Zeros));
  }
  t.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));

  // Expert sources: per layer, fused over the E experts.
  auto expert = [](std::string name, std::vector<int64_t> shape, std::vector<std::string_view> fields,
                   WeightInit init, TensorEncoding enc = TensorEncoding::Float) {
    TensorDecl d = tensor_decl(std::move(name), std::move(shape), std::move(fields), init);
    d.is_expert = true;
    d.encoding = enc;
    return d;
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    const std::string gate_up = p + "gate_up_proj", down = p + "down_proj";
    if (layout == kMxfp4) {
      t.push_back(expert(gate_up + "_blocks", {E, 2 * I, H / 32, 16}, {kExperts, kFfn2, kHidden32, kBlock},
                         WeightInit::Mxfp4Blocks, TensorEncoding::Mxfp4Blocks));
      t.push_back(expert(gate_up + "_scales", {E, 2 * I, H / 32}, {kExperts, kFfn2, kHidden32},
                         WeightInit::Mxfp4Scales, TensorEncoding::Mxfp4Scales));
    } else {
      TensorDecl d = expert(gate_up, {E, H, 2 * I}, {kExperts, kHidden, kFfn2}, WeightInit::Mxfp4Dequantized);
      d.twin_blocks = gate_up + "_blocks";
      d.twin_scales = gate_up + "_scales";
      d.twin_transposed = true;
      t.push_back(std::move(d));
    }
    t.push_back(expert(gate_up + "_bias", {E, 2 * I}, {kExperts, kFfn2}, WeightInit::Zeros));
    if (layout == kMxfp4) {
      t.push_back(expert(down + "_blocks", {E, H, I / 32, 16}, {kExperts, kHidden, kFfn32, kBlock},
                         WeightInit::Mxfp4Blocks, TensorEncoding::Mxfp4Blocks));
      t.push_back(expert(down + "_scales", {E, H, I / 32}, {kExperts, kHidden, kFfn32}, WeightInit::Mxfp4Scales,
                         TensorEncoding::Mxfp4Scales));
    } else {
      TensorDecl d = expert(down, {E, I, H}, {kExperts, kFfn, kHidden}, WeightInit::Mxfp4Dequantized);
      d.twin_blocks = down + "_blocks";
      d.twin_scales = down + "_scales";
      d.twin_transposed = true;
      t.push_back(std::move(d));
    }
    t.push_back(expert(down + "_bias", {E, H}, {kExperts, kHidden}, WeightInit::Zeros));

    // Sections: gate = even rows of the fused projection, up = odd rows.
    auto matrix = [&](const std::string& base, int64_t e, int64_t start, int64_t step) {
      return layout == kMxfp4 ? SectionSource{base + "_blocks", base + "_scales", e, false, start, step}
                              : SectionSource{base, "", e, true, start, step};
    };
    for (int64_t e = 0; e < E; ++e) {
      decls.sections.push_back({l, e, "gate", {I, H}, {kFfn, kHidden}, matrix(gate_up, e, 0, 2)});
      decls.sections.push_back({l, e, "up", {I, H}, {kFfn, kHidden}, matrix(gate_up, e, 1, 2)});
      decls.sections.push_back({l, e, "down", {H, I}, {kHidden, kFfn}, matrix(down, e, 0, 1)});
      decls.sections.push_back({l, e, "gate_bias", {I}, {kFfn}, {gate_up + "_bias", "", e, false, 0, 2}});
      decls.sections.push_back({l, e, "up_bias", {I}, {kFfn}, {gate_up + "_bias", "", e, false, 1, 2}});
      decls.sections.push_back({l, e, "down_bias", {H}, {kHidden}, {down + "_bias", "", e, false, 0, 1}});
    }
  }
  return decls;
}

}  // namespace

const ArchSpec& gpt_oss_arch() {
  static const ArchSpec spec{"gpt_oss",
                             parse_gpt_oss,
                             {"mxfp4", "float"},
                             gpt_oss_tensors,
                             {"gate", "up", "down", "gate_bias", "up_bias", "down_bias"}};
  return spec;
}

}  // namespace tern
