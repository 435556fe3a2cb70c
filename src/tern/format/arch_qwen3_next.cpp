// Qwen3-Next (model_type "qwen3_next"; Qwen3-Next-80B-A3B). A hybrid
// decoder: most layers mix tokens through Gated DeltaNet linear attention
// (linear_attn.*: in_proj_qkvz, in_proj_ba, a causal depthwise conv1d, the
// gated delta rule over a per-sequence state, a gated RMSNorm, out_proj),
// every `full_attention_interval`-th through gated full attention
// (self_attn.*: q_proj yields a query and a sigmoid output gate per head,
// per-head q/k RMSNorm, RoPE on the leading head_dim x partial_rotary_factor
// dims, GQA). Every layer's feed-forward is Qwen2-MoE's: softmax top-k
// routed SwiGLU experts plus a shared expert gated by sigmoid(gate . x), or
// a dense MLP on `mlp_only_layers`. The decoder's RMSNorms (and q/k norms)
// store zero-centred weights: the scale is 1 + w. Facts: transformers
// configuration_qwen3_next.py / modeling_qwen3_next.py (added in v4.57;
// read from a later snapshot whose math is the same, released checkpoints
// keeping one tensor per expert projection); the
// checkpoint's mtp.* tensors (multi-token prediction) are not read, as
// transformers ignores them.
#include <cmath>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view
    kVocab = "vocab_size",
    kHidden = "hidden_size", kHeadDim = "head_dim", kExperts = "num_experts",
    kFfn = "intermediate_size", kMoeFfn = "moe_intermediate_size",
    kSharedFfn = "shared_expert_intermediate_size", kOne = "1",
    kQGate = "num_attention_heads x head_dim x 2", kQ = "num_attention_heads x head_dim",
    kKv = "num_key_value_heads x head_dim",
    kQkvz =
        "2 x linear_num_key_heads x linear_key_head_dim + 2 x linear_num_value_heads x "
        "linear_value_head_dim",
    kBa = "2 x linear_num_value_heads", kVHeads = "linear_num_value_heads",
    kVDim = "linear_value_head_dim", kValueDim = "linear_num_value_heads x linear_value_head_dim",
    kConvDim =
        "2 x linear_num_key_heads x linear_key_head_dim + linear_num_value_heads x "
        "linear_value_head_dim",
    kConvKernel = "linear_conv_kernel_dim";
constexpr std::string_view kLinear = "linear_attention", kFull = "full_attention";

void parse_qwen3_next(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  // Qwen3NextConfig's head_dim defaults to 256, not hidden / heads.
  if (!r.has("head_dim") && r.has("hidden_size"))
    r.invalid("head_dim", "is missing; Qwen3-Next configs give it (transformers would assume 256)");
  read_decoder_fields(r, cfg);
  read_norm_rope_fields(r, cfg, 1e-6, 10000.0, 32768);  // Qwen3NextConfig's defaults
  require_plain_rope_and_silu(r, cfg, "qwen3_next");
  read_qwen_moe_fields(r, cfg);
  cfg.norm_topk_prob = r.get_bool("norm_topk_prob", true);
  cfg.shared_expert_intermediate_size = r.get_int("shared_expert_intermediate_size", 512);
  if (cfg.num_experts > 0)
    r.require_range("shared_expert_intermediate_size", cfg.shared_expert_intermediate_size, 1,
                    lim::kMaxFfn);
  if (r.get_bool("use_sliding_window", false))
    r.invalid("use_sliding_window", "is true; Qwen3-Next has no sliding-window attention");

  const double partial = r.get_double("partial_rotary_factor", 0.25);
  r.require_finite("partial_rotary_factor", partial, 0.0, 1.0);
  cfg.rotary_dim = static_cast<int64_t>(std::floor(static_cast<double>(cfg.head_dim) * partial));
  if (cfg.rotary_dim < 2 || cfg.rotary_dim % 2 != 0)
    r.invalid("partial_rotary_factor",
              fmt::format("x head_dim ({}) gives {} rotary dims; RoPE needs an even number "
                          "of at least 2",
                          cfg.head_dim, cfg.rotary_dim));
  cfg.qk_norm = true;
  cfg.attention_output_gate = true;
  cfg.zero_centred_norms = true;

  ModelConfig::LinearAttention& la = cfg.linear_attention;
  la.num_key_heads = r.get_int("linear_num_key_heads", 16);
  la.num_value_heads = r.get_int("linear_num_value_heads", 32);
  la.key_head_dim = r.get_int("linear_key_head_dim", 128);
  la.value_head_dim = r.get_int("linear_value_head_dim", 128);
  la.conv_kernel = r.get_int("linear_conv_kernel_dim", 4);
  r.require_range("linear_num_key_heads", la.num_key_heads, 1, lim::kMaxHeads);
  r.require_range("linear_num_value_heads", la.num_value_heads, 1, lim::kMaxHeads);
  r.require_range("linear_key_head_dim", la.key_head_dim, 1, lim::kMaxHeadDim);
  r.require_range("linear_value_head_dim", la.value_head_dim, 1, lim::kMaxHeadDim);
  r.require_range("linear_conv_kernel_dim", la.conv_kernel, 1, 64);
  if (la.num_value_heads % la.num_key_heads != 0)
    r.invalid("linear_num_value_heads",
              fmt::format("({}) is not a multiple of linear_num_key_heads ({})", la.num_value_heads,
                          la.num_key_heads));
  if (la.conv_dim() > lim::kMaxAttentionWidth)
    r.invalid("linear_num_value_heads", fmt::format("gives a conv1d width of {} (at most {})",
                                                    la.conv_dim(), lim::kMaxAttentionWidth));

  // layer_types as given, else transformers' rule: every
  // full_attention_interval-th layer is full attention.
  la.layers.assign(static_cast<size_t>(cfg.num_layers), false);
  if (r.has("layer_types")) {
    const std::vector<std::string> types = r.get_string_list("layer_types");
    if (static_cast<int64_t>(types.size()) != cfg.num_layers)
      r.invalid("layer_types", fmt::format("has {} entries but num_hidden_layers is {}",
                                           types.size(), cfg.num_layers));
    for (size_t l = 0; l < types.size(); ++l) {
      if (types[l] != kLinear && types[l] != kFull)
        r.invalid("layer_types", fmt::format("entry {} is {}; expected \"{}\" or \"{}\"", l,
                                             json_excerpt(types[l]), kLinear, kFull));
      la.layers[l] = types[l] == kLinear;
    }
  } else {
    const int64_t interval = r.get_int("full_attention_interval", 4);
    r.require_range("full_attention_interval", interval, 1, lim::kMaxLayers);
    for (int64_t l = 0; l < cfg.num_layers; ++l)
      la.layers[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
}

CheckpointDecls qwen3_next_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, D = c.head_dim;
  const ModelConfig::LinearAttention& la = c.linear_attention;
  // Zero-centred norm weights: synth draws them near 0 (a scale near 1).
  auto norm = [&](const std::string& name, int64_t n, std::string_view field) {
    t.push_back(tensor_decl(name, {n}, {field}, WeightInit::Zeros));
  };
  auto mlp = [&](const std::string& p, int64_t I, std::string_view field) {
    t.push_back(tensor_decl(p + "gate_proj.weight", {I, H}, {field, kHidden}));
    t.push_back(tensor_decl(p + "up_proj.weight", {I, H}, {field, kHidden}));
    t.push_back(tensor_decl(p + "down_proj.weight", {H, I}, {kHidden, field}));
  };
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden},
                          WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    norm(p + "input_layernorm.weight", H, kHidden);
    if (c.layer_is_linear(l)) {
      const std::string a = p + "linear_attn.";
      t.push_back(tensor_decl(a + "in_proj_qkvz.weight", {2 * la.key_dim() + 2 * la.value_dim(), H},
                              {kQkvz, kHidden}));
      t.push_back(
          tensor_decl(a + "in_proj_ba.weight", {2 * la.num_value_heads, H}, {kBa, kHidden}));
      t.push_back(tensor_decl(a + "conv1d.weight", {la.conv_dim(), 1, la.conv_kernel},
                              {kConvDim, kOne, kConvKernel}));
      t.push_back(tensor_decl(a + "dt_bias", {la.num_value_heads}, {kVHeads}, WeightInit::Ones));
      t.push_back(tensor_decl(a + "A_log", {la.num_value_heads}, {kVHeads}, WeightInit::LogDecay));
      t.push_back(tensor_decl(a + "norm.weight", {la.value_head_dim}, {kVDim}, WeightInit::Ones));
      t.push_back(tensor_decl(a + "out_proj.weight", {H, la.value_dim()}, {kHidden, kValueDim}));
    } else {
      const std::string a = p + "self_attn.";
      const int64_t q = c.num_heads * D, kv = c.num_kv_heads * D;
      t.push_back(tensor_decl(a + "q_proj.weight", {2 * q, H}, {kQGate, kHidden}));
      if (c.attention_bias)
        t.push_back(tensor_decl(a + "q_proj.bias", {2 * q}, {kQGate}, WeightInit::Zeros));
      t.push_back(tensor_decl(a + "k_proj.weight", {kv, H}, {kKv, kHidden}));
      if (c.attention_bias)
        t.push_back(tensor_decl(a + "k_proj.bias", {kv}, {kKv}, WeightInit::Zeros));
      t.push_back(tensor_decl(a + "v_proj.weight", {kv, H}, {kKv, kHidden}));
      if (c.attention_bias)
        t.push_back(tensor_decl(a + "v_proj.bias", {kv}, {kKv}, WeightInit::Zeros));
      t.push_back(tensor_decl(a + "o_proj.weight", {H, q}, {kHidden, kQ}));
      if (c.attention_bias)
        t.push_back(tensor_decl(a + "o_proj.bias", {H}, {kHidden}, WeightInit::Zeros));
      norm(a + "q_norm.weight", D, kHeadDim);
      norm(a + "k_norm.weight", D, kHeadDim);
    }
    norm(p + "post_attention_layernorm.weight", H, kHidden);
    if (c.layer_is_moe(l)) {
      t.push_back(tensor_decl(p + "mlp.gate.weight", {c.num_experts, H}, {kExperts, kHidden},
                              WeightInit::Router));
      mlp(p + "mlp.shared_expert.", c.shared_expert_intermediate_size, kSharedFfn);
      t.push_back(tensor_decl(p + "mlp.shared_expert_gate.weight", {1, H}, {kOne, kHidden},
                              WeightInit::Router));
    } else {
      mlp(p + "mlp.", c.intermediate_size, kFfn);
    }
  }
  norm("model.norm.weight", H, kHidden);
  if (!c.tie_word_embeddings)
    t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_is_moe(l))
      declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.mlp.experts.", l),
                             c.moe_intermediate_size, kMoeFfn);
  return decls;
}

}  // namespace

const ArchSpec& qwen3_next_arch() {
  static const ArchSpec spec{
      "qwen3_next", parse_qwen3_next, {"float"}, qwen3_next_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
