// OLMoE (model_type "olmoe"; OLMoE-1B-7B). A Llama-style decoder whose
// attention normalises q and k with RMSNorm over the whole projection (not
// per head) before RoPE, optionally clamps q, k, v (clip_qkv), and a routed
// MoE in every layer: softmax over all experts, top-k, renormalised only
// when norm_topk_prob (false as released). Facts: transformers v4.57
// configuration_olmoe.py / modeling_olmoe.py (notes in docs/DESIGN.md).
#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kExperts = "num_experts",
                           kFfn = "intermediate_size", kQ = "num_attention_heads x head_dim",
                           kKv = "num_key_value_heads x head_dim";

// Defaults of transformers' OlmoeConfig where config.json may omit a field
// (OLMoE-1B-7B's config.json has no rms_norm_eps).
constexpr int64_t kDefaultExperts = 64, kDefaultTopK = 8, kDefaultMaxPositions = 4096;
constexpr double kDefaultRmsEps = 1e-5, kDefaultRopeTheta = 10000.0;

void parse_olmoe(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  // head_dim is always hidden_size / num_attention_heads in OLMoE.
  if (cfg.hidden_size % cfg.num_heads != 0)
    r.invalid("num_attention_heads", fmt::format("({}) must divide hidden_size ({}) for olmoe", cfg.num_heads,
                                                 cfg.hidden_size));
  if (r.has("head_dim") && cfg.head_dim != cfg.hidden_size / cfg.num_heads)
    r.invalid("head_dim", fmt::format("({}) differs from hidden_size / num_attention_heads ({}); OLMoE's attention "
                                      "always uses the latter",
                                      cfg.head_dim, cfg.hidden_size / cfg.num_heads));
  cfg.head_dim = cfg.hidden_size / cfg.num_heads;
  read_norm_rope_fields(r, cfg, kDefaultRmsEps, kDefaultRopeTheta, kDefaultMaxPositions);
  require_plain_rope_and_silu(r, cfg, "olmoe");
  if (r.has("clip_qkv")) {
    cfg.clip_qkv = r.get_double("clip_qkv");
    r.require_finite("clip_qkv", cfg.clip_qkv, 0.0, 1e30);
  }

  // Every layer routes to experts; there is no dense MLP.
  cfg.num_experts = r.get_int("num_experts", kDefaultExperts);
  r.require_range("num_experts", cfg.num_experts, 1, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("num_experts_per_tok", kDefaultTopK);
  r.require_range("num_experts_per_tok", cfg.num_experts_per_tok, 1, cfg.num_experts);
  cfg.moe_intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
  cfg.intermediate_size = 0;
  cfg.norm_topk_prob = r.get_bool("norm_topk_prob", false);
  cfg.decoder_sparse_step = 1;
  cfg.mlp_only_layers.clear();
}

CheckpointDecls olmoe_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, c.attention_bias, c.attention_bias);
    t.push_back(tensor_decl(p + "self_attn.q_norm.weight", {c.num_heads * c.head_dim}, {kQ}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "self_attn.k_norm.weight", {c.num_kv_heads * c.head_dim}, {kKv}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "mlp.gate.weight", {E, H}, {kExperts, kHidden}, WeightInit::Router));
  }
  t.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.mlp.experts.", l), I, kFfn);
  }
  return decls;
}

}  // namespace

const ArchSpec& olmoe_arch() {
  static const ArchSpec spec{"olmoe", parse_olmoe, {"float"}, olmoe_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
