// GLM-4.5 (model_type "glm4_moe"; GLM-4.5, GLM-4.5-Air, GLM-4.6). A GQA
// decoder with q/k/v biases (attention_bias; o_proj has none), optional
// per-head q/k RMSNorm before RoPE (use_qk_norm), partial rotary (rotate_half
// on the first head_dim x partial_rotary_factor dims of each head,
// frequencies over those dims), and DeepSeek-V3's feed-forward: the first
// first_k_dense_replace layers dense, the others a noaux_tc-routed MoE
// (sigmoid scores, group-limited top-k on score + e_score_correction_bias,
// renormalised x routed_scaling_factor) plus ungated shared experts. The
// checkpoint's multi-token-prediction layers (model.layers.{num_hidden_layers}.*)
// are ignored, as transformers ignores them. Facts: transformers v4.57
// configuration_glm4_moe.py / modeling_glm4_moe.py.
#include <cmath>

#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kHeadDim = "head_dim";

// transformers' Glm4MoeConfig defaults, for fields a config.json may omit.
constexpr GroupedMoeDefaults kMoeDefaults{128, 8, 1, 1, 1, 1, 1.0};
constexpr double kDefaultPartialRotary = 0.5;

void parse_glm4_moe(const ConfigReader& r, ModelConfig& cfg) {
  read_decoder_fields(r, cfg);
  read_norm_rope_fields(r, cfg, 1e-5, 10000.0, 131072);
  require_plain_rope_and_silu(r, cfg, "glm4_moe");
  const double partial = r.get_double("partial_rotary_factor", kDefaultPartialRotary);
  r.require_finite("partial_rotary_factor", partial, 0.0, 1.0);
  // transformers: int(head_dim * partial_rotary_factor).
  cfg.rotary_dim = static_cast<int64_t>(std::floor(static_cast<double>(cfg.head_dim) * partial));
  if (cfg.rotary_dim < 2 || cfg.rotary_dim % 2 != 0)
    r.invalid("partial_rotary_factor", fmt::format("x head_dim ({}) gives {} rotary dims; RoPE needs an even number "
                                                   ">= 2",
                                                   cfg.head_dim, cfg.rotary_dim));
  cfg.qk_norm = r.get_bool("use_qk_norm", false);
  read_grouped_moe_fields(r, cfg, kMoeDefaults);
}

CheckpointDecls glm4_moe_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, c.attention_bias, false);
    if (c.qk_norm) {
      t.push_back(tensor_decl(p + "self_attn.q_norm.weight", {c.head_dim}, {kHeadDim}, WeightInit::Ones));
      t.push_back(tensor_decl(p + "self_attn.k_norm.weight", {c.head_dim}, {kHeadDim}, WeightInit::Ones));
    }
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_grouped_moe_or_dense(t, p + "mlp.", c, l);
  }
  declare_grouped_moe_tail(decls, c);
  return decls;
}

}  // namespace

const ArchSpec& glm4_moe_arch() {
  static const ArchSpec spec{"glm4_moe", parse_glm4_moe, {"float"}, glm4_moe_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
