// Qwen3-MoE (model_type "qwen3_moe"): Llama-style decoder with per-head
// q/k RMSNorm, GQA, and a top-k routed SwiGLU mixture of experts in every
// `decoder_sparse_step`-th layer that is not listed in `mlp_only_layers`.
#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

// The config.json fields behind each dimension (TensorDecl::dim_fields).
constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kHeadDim = "head_dim",
                           kFfn = "intermediate_size", kExperts = "num_experts", kMoeFfn = "moe_intermediate_size";

void parse_qwen3_moe(const ConfigReader& r, ModelConfig& cfg) {
  read_decoder_fields(r, cfg);
  read_qwen_moe_fields(r, cfg);
  if (r.has("sliding_window") && r.get_bool("use_sliding_window", false))
    r.invalid("use_sliding_window", "is true; sliding-window attention is not supported for qwen3_moe");
}

CheckpointDecls qwen3_moe_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, D = c.head_dim;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, c.attention_bias, c.attention_bias);
    t.push_back(tensor_decl(p + "self_attn.q_norm.weight", {D}, {kHeadDim}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "self_attn.k_norm.weight", {D}, {kHeadDim}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    if (c.layer_is_moe(l)) {
      t.push_back(tensor_decl(p + "mlp.gate.weight", {c.num_experts, H}, {kExperts, kHidden}, WeightInit::Router));
    } else {
      const int64_t I = c.intermediate_size;
      t.push_back(tensor_decl(p + "mlp.gate_proj.weight", {I, H}, {kFfn, kHidden}));
      t.push_back(tensor_decl(p + "mlp.up_proj.weight", {I, H}, {kFfn, kHidden}));
      t.push_back(tensor_decl(p + "mlp.down_proj.weight", {H, I}, {kHidden, kFfn}));
    }
  }
  t.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  // Routed experts, layer by layer, expert by expert, sections in record
  // order: one checkpoint tensor per section, taken whole.
  const int64_t I = c.moe_intermediate_size;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.layer_is_moe(l)) continue;
    declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.mlp.experts.", l), I, kMoeFfn);
  }
  return decls;
}

}  // namespace

const ArchSpec& qwen3_moe_arch() {
  static const ArchSpec spec{"qwen3_moe", parse_qwen3_moe, {"float"}, qwen3_moe_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
