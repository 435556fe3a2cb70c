// Qwen2-MoE (model_type "qwen2_moe"; Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B). A
// Llama-style decoder with q/k/v biases (qkv_bias, true as released; none on
// o_proj), RoPE, GQA, and in every `decoder_sparse_step`-th layer not in
// `mlp_only_layers` a routed MoE (softmax over all experts, top-k,
// renormalised only when norm_topk_prob, false as released) plus a shared
// SwiGLU expert every token goes through, gated per token by
// sigmoid(shared_expert_gate . x). Facts: transformers v4.57
// configuration_qwen2_moe.py / modeling_qwen2_moe.py.
#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kExperts = "num_experts",
                           kFfn = "intermediate_size", kMoeFfn = "moe_intermediate_size",
                           kSharedFfn = "shared_expert_intermediate_size", kOne = "1";

void parse_qwen2_moe(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  // The attention output is reshaped to hidden_size: head_dim is hidden / heads.
  if (cfg.num_heads * cfg.head_dim != cfg.hidden_size)
    r.invalid("head_dim", fmt::format("x num_attention_heads = {} differs from hidden_size ({}); Qwen2-MoE's "
                                      "attention needs them equal",
                                      cfg.num_heads * cfg.head_dim, cfg.hidden_size));
  if (r.get_bool("attention_bias", false))
    r.invalid("attention_bias", "is set; Qwen2-MoE's biases are q/k/v only, set by qkv_bias");
  cfg.attention_bias = r.get_bool("qkv_bias", true);
  read_norm_rope_fields(r, cfg, 1e-6, 10000.0, 32768);  // Qwen2MoeConfig's defaults
  require_plain_rope_and_silu(r, cfg, "qwen2_moe");
  read_qwen_moe_fields(r, cfg);
  cfg.shared_expert_intermediate_size = r.get_int("shared_expert_intermediate_size");
  r.require_range("shared_expert_intermediate_size", cfg.shared_expert_intermediate_size, 1, lim::kMaxFfn);
  // Released configs set use_sliding_window false, which makes transformers
  // ignore sliding_window; its backends disagree on which layers slide when
  // it is true, so that is refused rather than guessed.
  if (r.get_bool("use_sliding_window", false))
    r.invalid("use_sliding_window", "is true; sliding-window attention is not supported for qwen2_moe");
}

CheckpointDecls qwen2_moe_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  auto mlp = [&](const std::string& p, int64_t I, std::string_view field) {
    t.push_back(tensor_decl(p + "gate_proj.weight", {I, H}, {field, kHidden}));
    t.push_back(tensor_decl(p + "up_proj.weight", {I, H}, {field, kHidden}));
    t.push_back(tensor_decl(p + "down_proj.weight", {H, I}, {kHidden, field}));
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, c.attention_bias, false);
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    if (c.layer_is_moe(l)) {
      t.push_back(tensor_decl(p + "mlp.gate.weight", {c.num_experts, H}, {kExperts, kHidden}, WeightInit::Router));
      mlp(p + "mlp.shared_expert.", c.shared_expert_intermediate_size, kSharedFfn);
      t.push_back(tensor_decl(p + "mlp.shared_expert_gate.weight", {1, H}, {kOne, kHidden}, WeightInit::Router));
    } else {
      mlp(p + "mlp.", c.intermediate_size, kFfn);
    }
  }
  t.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_is_moe(l))
      declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.mlp.experts.", l), c.moe_intermediate_size,
                             kMoeFfn);
  return decls;
}

}  // namespace

const ArchSpec& qwen2_moe_arch() {
  static const ArchSpec spec{"qwen2_moe", parse_qwen2_moe, {"float"}, qwen2_moe_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
