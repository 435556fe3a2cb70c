// Gemma 4's text MoE (gemma-4-26B-A4B). model_type "gemma4" is the released
// multimodal checkpoint (Gemma4ForConditionalGeneration): the text model's
// config is its "text_config" and its weights sit under
// "model.language_model."; the vision and audio towers are not read.
// "gemma4_text" is the text-only Gemma4ForCausalLM layout ("model.*",
// "lm_head"). What is new next to the other architectures:
//   - two layer types (layer_types): sliding_attention layers use head_dim,
//     num_key_value_heads, default RoPE and a window of sliding_window keys;
//     full_attention layers use global_head_dim and, with attention_k_eq_v,
//     num_global_key_value_heads and no v_proj (v is the raw k projection),
//     with "proportional" RoPE (rope_parameters.full_attention:
//     partial_rotary_factor of the pairs rotate, frequencies over the whole
//     head);
//   - q/k RMSNorm per head, v RMS-normed without a weight, attention scale 1;
//   - the embeddings times sqrt(hidden_size), norms that scale by w, final
//     logit softcapping;
//   - every layer runs a dense GeGLU MLP and the routed experts on the same
//     residual, each with its own pre/post norms, summed, normed, added, and
//     the layer's output times its layer_scalar;
//   - the router: weightless RMSNorm of the residual x router.scale x
//     hidden^-1/2, router.proj, softmax, top-k, renormalised, times
//     router.per_expert_scale; experts fused over a layer, gate_up_proj
//     [E, 2I, H] (gate rows first) and down_proj [E, H, I].
// Facts: transformers modeling_gemma4.py / configuration_gemma4.py;
// docs/gemma4_facts.md. Per-layer embeddings (the E2B/E4B models'
// hidden_size_per_layer_input) and KV sharing (num_kv_shared_layers) are
// refused: the MoE release has neither.
#include <cmath>

#include "tern/core/dtype.h"
#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kHeadDim = "head_dim",
                           kGlobalHeadDim = "global_head_dim", kExperts = "num_experts",
                           kFfn = "intermediate_size", kMoeFfn = "moe_intermediate_size",
                           kMoeFfn2 = "2 x moe_intermediate_size", kOne = "1",
                           kQ = "num_attention_heads x head_dim", kKv = "num_key_value_heads x head_dim",
                           kGlobalQ = "num_attention_heads x global_head_dim",
                           kGlobalKv = "num_key_value_heads x global_head_dim",
                           kGlobalKvKeqV = "num_global_key_value_heads x global_head_dim";
constexpr std::string_view kSliding = "sliding_attention", kFull = "full_attention";

// rope_parameters[type] (transformers' defaults when absent): the theta, and
// for full layers the proportional rope's partial_rotary_factor.
struct LayerRope {
  double theta;
  double partial;
  std::string type;
};

LayerRope read_layer_rope(const ConfigReader& r, std::string_view layer_type, LayerRope fallback) {
  const nlohmann::json& raw = r.raw();
  if (!raw.contains("rope_parameters") || raw["rope_parameters"].is_null()) return fallback;
  const nlohmann::json& all = raw["rope_parameters"];
  const std::string key = fmt::format("rope_parameters.{}", layer_type);
  if (!all.is_object() || !all.contains(layer_type) || !all[std::string(layer_type)].is_object())
    r.invalid("rope_parameters", fmt::format("has no object \"{}\"; Gemma 4 gives one per layer type", layer_type));
  const nlohmann::json& p = all[std::string(layer_type)];
  LayerRope out = fallback;
  out.type = p.value("rope_type", std::string("default"));
  if (p.contains("rope_theta")) {
    if (!p["rope_theta"].is_number()) r.invalid(key, "rope_theta is not a number");
    out.theta = p["rope_theta"].get<double>();
  }
  if (p.contains("partial_rotary_factor")) {
    if (!p["partial_rotary_factor"].is_number()) r.invalid(key, "partial_rotary_factor is not a number");
    out.partial = p["partial_rotary_factor"].get<double>();
  }
  // transformers' proportional RoPE divides every frequency by "factor" (default 1); no Gemma 4
  // release sets it, so Tern refuses it rather than guess at a context-extension scheme.
  if (p.contains("factor") && !(p["factor"].is_number() && p["factor"].get<double>() == 1.0))
    r.invalid(key, fmt::format("factor is {}; Tern supports Gemma 4 RoPE without frequency scaling (factor 1)",
                               p["factor"].dump()));
  if (!(out.theta > 0) || !std::isfinite(out.theta) || out.theta > 1e15)
    r.invalid(key, fmt::format("rope_theta must be in (0, 1e15], got {}", out.theta));
  if (!(out.partial > 0) || out.partial > 1)
    r.invalid(key, fmt::format("partial_rotary_factor must be in (0, 1], got {}", out.partial));
  return out;
}

// The checkpoint's dtype as the config names it ("dtype" since transformers 5, "torch_dtype"
// before), or "" when absent.
std::string config_dtype(const nlohmann::json& j) {
  for (const char* key : {"dtype", "torch_dtype"})
    if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return "";
}

// transformers multiplies the embeddings by sqrt(hidden_size) cast to the embedding weight's
// dtype (Gemma4TextScaledWordEmbedding: embed_scale.to(weight.dtype)), so a bfloat16 checkpoint's
// scale is sqrt(hidden) rounded to bfloat16 (sqrt(2816) = 53.07 becomes 53.0). Tern follows the
// dtype the checkpoint was released in, whatever format the trunk is installed as.
double gemma4_embedding_scale(int64_t hidden, const std::string& dtype) {
  const auto exact = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  if (dtype == "bfloat16") return bf16_to_f32(f32_to_bf16(exact));
  if (dtype == "float16") return f16_to_f32(f32_to_f16(exact));
  return exact;
}

void parse_gemma4_text(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  if (!r.has("head_dim") && r.has("hidden_size"))
    r.invalid("head_dim", "is missing; Gemma 4 configs give it (transformers would assume 256)");
  read_decoder_fields(r, cfg);
  cfg.tie_word_embeddings = r.get_bool("tie_word_embeddings", true);
  cfg.max_position_embeddings = r.get_int("max_position_embeddings", 131072);
  r.require_range("max_position_embeddings", cfg.max_position_embeddings, 1, lim::kMaxPositions);
  if (r.has("rope_scaling")) r.invalid("rope_scaling", "is set; Gemma 4 configs give rope_parameters per layer type");

  const std::string act = r.get_string("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    r.invalid("hidden_activation", fmt::format("is {}; Tern runs Gemma 4's gelu_pytorch_tanh", json_excerpt(act)));
  cfg.hidden_act = act;
  // transformers' default is 256 (per-layer embeddings on); an explicit null or 0 turns them off.
  const bool ple_null = r.raw().contains("hidden_size_per_layer_input") && r.raw()["hidden_size_per_layer_input"].is_null();
  if (!ple_null && r.get_int("hidden_size_per_layer_input", 256) > 0)
    r.invalid("hidden_size_per_layer_input",
              "is set (per-layer embeddings, Gemma 4 E2B/E4B); Tern runs the MoE release, which has none "
              "(hidden_size_per_layer_input 0)");
  if (r.get_int("num_kv_shared_layers", 0) != 0)
    r.invalid("num_kv_shared_layers", "is set (layers sharing another layer's KV); not implemented");
  if (r.has("use_bidirectional_attention"))
    r.invalid("use_bidirectional_attention", "is set; Tern runs causal text attention only");
  if (r.get_bool("use_double_wide_mlp", false))
    r.invalid("use_double_wide_mlp", "is true (only with KV sharing, which is not implemented)");
  if (!r.get_bool("enable_moe_block", false))
    r.invalid("enable_moe_block", "is false: a dense Gemma 4 model; Tern runs the mixture-of-experts release");

  // Layer types: as given, else transformers' rule (every 6th layer full);
  // the last layer is always full attention, as transformers forces it.
  read_sliding_layer_types(r, cfg, [](int64_t l) { return (l + 1) % 6 != 0; });
  cfg.sliding_layers.back() = false;
  cfg.sliding_window = r.get_int("sliding_window", 512);
  r.require_range("sliding_window", cfg.sliding_window, 1, lim::kMaxPositions);

  cfg.global_head_dim = r.get_int("global_head_dim", 512);
  r.require_range("global_head_dim", cfg.global_head_dim, 2, lim::kMaxHeadDim);
  if (cfg.global_head_dim % 2 != 0)
    r.invalid("global_head_dim", fmt::format("must be even for RoPE, got {}", cfg.global_head_dim));
  if (cfg.num_heads * cfg.global_head_dim > lim::kMaxAttentionWidth)
    r.invalid("global_head_dim", fmt::format("x num_attention_heads exceeds the limit {}", lim::kMaxAttentionWidth));
  cfg.attention_k_eq_v = r.get_bool("attention_k_eq_v", false);
  cfg.num_global_kv_heads = cfg.num_kv_heads;
  if (cfg.attention_k_eq_v && r.has("num_global_key_value_heads")) {
    cfg.num_global_kv_heads = r.get_int("num_global_key_value_heads");
    r.require_range("num_global_key_value_heads", cfg.num_global_kv_heads, 1, cfg.num_heads);
    if (cfg.num_heads % cfg.num_global_kv_heads != 0)
      r.invalid("num_global_key_value_heads", fmt::format("({}) must divide num_attention_heads ({})",
                                                          cfg.num_global_kv_heads, cfg.num_heads));
  }

  const LayerRope sliding = read_layer_rope(r, kSliding, {10000.0, 1.0, "default"});
  const LayerRope full = read_layer_rope(r, kFull, {1000000.0, 0.25, "proportional"});
  if (sliding.type != "default")
    r.invalid("rope_parameters", fmt::format("sliding_attention rope_type is {}; Gemma 4 uses \"default\"",
                                             json_excerpt(sliding.type)));
  if (sliding.partial != 1.0)
    r.invalid("rope_parameters", "sliding_attention has a partial_rotary_factor; Gemma 4 rotates all of head_dim");
  if (full.type != "proportional" && full.type != "default")
    r.invalid("rope_parameters", fmt::format("full_attention rope_type is {}; Tern implements \"proportional\" "
                                             "and \"default\"",
                                             json_excerpt(full.type)));
  cfg.rope_theta = sliding.theta;
  cfg.full_rope_theta = full.theta;
  // Proportional: int(partial x head_dim / 2) of the head_dim / 2 pairs
  // rotate; default rotates them all.
  const double partial = full.type == "proportional" ? full.partial : 1.0;
  cfg.full_rotary_pairs = static_cast<int64_t>(partial * static_cast<double>(cfg.global_head_dim) / 2.0);
  if (cfg.full_rotary_pairs < 1)
    r.invalid("rope_parameters", fmt::format("full_attention partial_rotary_factor {} x global_head_dim {} / 2 "
                                             "leaves no pair to rotate",
                                             full.partial, cfg.global_head_dim));

  cfg.qk_norm = true;
  cfg.sandwich_norms = true;
  cfg.embedding_scale = gemma4_embedding_scale(cfg.hidden_size, config_dtype(r.raw()));
  if (r.has("final_logit_softcapping")) {
    cfg.final_logit_softcapping = r.get_double("final_logit_softcapping");
    r.require_finite("final_logit_softcapping", cfg.final_logit_softcapping, 0.0, 1e6);
  }

  cfg.intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.intermediate_size, 1, lim::kMaxFfn);
  cfg.num_experts = r.get_int("num_experts");
  r.require_range("num_experts", cfg.num_experts, 1, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("top_k_experts");
  r.require_range("top_k_experts", cfg.num_experts_per_tok, 1, cfg.num_experts);
  cfg.moe_intermediate_size = r.get_int("moe_intermediate_size");
  r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
  cfg.norm_topk_prob = true;
}

void parse_gemma4(const ConfigReader& r, ModelConfig& cfg) {
  const nlohmann::json& raw = r.raw();
  if (!raw.contains("text_config") || !raw["text_config"].is_object())
    r.invalid("text_config", "is missing; a gemma4 config.json holds the text model's config there");
  const ConfigReader text(raw["text_config"], r.source() + " (text_config)", "gemma4");
  parse_gemma4_text(text, cfg);
  if (config_dtype(raw["text_config"]).empty())  // the dtype may be given only at the top level
    cfg.embedding_scale = gemma4_embedding_scale(cfg.hidden_size, config_dtype(raw));
  // The multimodal checkpoint ties the embeddings unless its top level says otherwise.
  cfg.tie_word_embeddings = raw["text_config"].value("tie_word_embeddings", r.get_bool("tie_word_embeddings", true));
  cfg.weight_prefix = "model.language_model.";
}

CheckpointDecls gemma4_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  auto norm = [&](const std::string& name, int64_t n, std::string_view field) {
    t.push_back(tensor_decl(name, {n}, {field}, WeightInit::Ones));
  };
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const bool full = !c.layer_is_sliding(l);
    const int64_t D = c.layer_head_dim(l), q = c.num_heads * D, kv = c.layer_kv_heads(l) * D;
    const std::string_view head = full ? kGlobalHeadDim : kHeadDim, q_field = full ? kGlobalQ : kQ,
                           kv_field = !full ? kKv : c.attention_k_eq_v ? kGlobalKvKeqV : kGlobalKv;
    norm(p + "input_layernorm.weight", H, kHidden);
    const std::string a = p + "self_attn.";
    auto projection = [&](const std::string& name, int64_t out, std::string_view out_field, int64_t in,
                          std::string_view in_field) {
      t.push_back(tensor_decl(a + name + ".weight", {out, in}, {out_field, in_field}));
      if (c.attention_bias) t.push_back(tensor_decl(a + name + ".bias", {out}, {out_field}, WeightInit::Zeros));
    };
    projection("q_proj", q, q_field, H, kHidden);
    projection("k_proj", kv, kv_field, H, kHidden);
    if (!c.layer_values_are_keys(l)) projection("v_proj", kv, kv_field, H, kHidden);
    projection("o_proj", H, kHidden, q, q_field);
    norm(a + "q_norm.weight", D, head);
    norm(a + "k_norm.weight", D, head);
    norm(p + "post_attention_layernorm.weight", H, kHidden);
    norm(p + "pre_feedforward_layernorm.weight", H, kHidden);
    t.push_back(tensor_decl(p + "mlp.gate_proj.weight", {c.intermediate_size, H}, {kFfn, kHidden}));
    t.push_back(tensor_decl(p + "mlp.up_proj.weight", {c.intermediate_size, H}, {kFfn, kHidden}));
    t.push_back(tensor_decl(p + "mlp.down_proj.weight", {H, c.intermediate_size}, {kHidden, kFfn}));
    norm(p + "post_feedforward_layernorm_1.weight", H, kHidden);
    t.push_back(tensor_decl(p + "router.proj.weight", {E, H}, {kExperts, kHidden}, WeightInit::Router));
    norm(p + "router.scale", H, kHidden);
    norm(p + "router.per_expert_scale", E, kExperts);
    norm(p + "pre_feedforward_layernorm_2.weight", H, kHidden);
    norm(p + "post_feedforward_layernorm_2.weight", H, kHidden);
    norm(p + "post_feedforward_layernorm.weight", H, kHidden);
    norm(p + "layer_scalar", 1, kOne);
  }
  norm("model.norm.weight", H, kHidden);
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));

  // Experts: fused over a layer's E experts, rows are output features.
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.experts.", l);
    const std::string gate_up = p + "gate_up_proj", down = p + "down_proj";
    TensorDecl gu = tensor_decl(gate_up, {E, 2 * I, H}, {kExperts, kMoeFfn2, kHidden});
    gu.is_expert = true;
    t.push_back(std::move(gu));
    TensorDecl d = tensor_decl(down, {E, H, I}, {kExperts, kHidden, kMoeFfn});
    d.is_expert = true;
    t.push_back(std::move(d));
    for (int64_t e = 0; e < E; ++e) {
      decls.sections.push_back({l, e, "gate", {I, H}, {kMoeFfn, kHidden}, {gate_up, "", e, false, 0, 1}});
      decls.sections.push_back({l, e, "up", {I, H}, {kMoeFfn, kHidden}, {gate_up, "", e, false, I, 1}});
      decls.sections.push_back({l, e, "down", {H, I}, {kHidden, kMoeFfn}, {down, "", e, false, 0, 1}});
    }
  }
  return decls;
}

}  // namespace

const ArchSpec& gemma4_arch() {
  static const ArchSpec spec{"gemma4", parse_gemma4, {"float"}, gemma4_tensors, {"gate", "up", "down"}};
  return spec;
}

const ArchSpec& gemma4_text_arch() {
  static const ArchSpec spec{"gemma4_text", parse_gemma4_text, {"float"}, gemma4_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
