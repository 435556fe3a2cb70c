// Mixtral (model_type "mixtral"; Mixtral-8x7B, Mixtral-8x22B). A Llama-style
// decoder: GQA without biases, RoPE, and in every layer a sparse MoE block
// (block_sparse_moe): softmax over all experts' router logits, the top k
// (2 as released) renormalised to sum to one, SwiGLU experts w2(silu(w1 x) *
// w3 x). When sliding_window is set, every layer attends through it (as
// transformers' Mixtral masks them; the released configs set it null).
// Facts: transformers v4.57 configuration_mixtral.py / modeling_mixtral.py.
#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kExperts = "num_local_experts",
                           kFfn = "intermediate_size";

// Defaults of transformers' MixtralConfig where config.json may omit a field.
constexpr int64_t kDefaultExperts = 8, kDefaultTopK = 2;
constexpr double kDefaultRopeTheta = 1e6, kDefaultRmsEps = 1e-5;
constexpr int64_t kDefaultMaxPositions = 4096 * 32;

void parse_mixtral(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  if (r.get_bool("attention_bias", false))
    r.invalid("attention_bias", "is true; Mixtral attention has no biases");
  cfg.attention_bias = false;
  read_norm_rope_fields(r, cfg, kDefaultRmsEps, kDefaultRopeTheta, kDefaultMaxPositions);
  require_plain_rope_and_silu(r, cfg, "mixtral");

  // Every layer routes to experts; there is no dense MLP.
  cfg.num_experts = r.get_int("num_local_experts", kDefaultExperts);
  r.require_range("num_local_experts", cfg.num_experts, 1, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("num_experts_per_tok", kDefaultTopK);
  r.require_range("num_experts_per_tok", cfg.num_experts_per_tok, 1, cfg.num_experts);
  cfg.moe_intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
  cfg.intermediate_size = 0;
  cfg.norm_topk_prob = true;
  cfg.decoder_sparse_step = 1;
  cfg.mlp_only_layers.clear();

  cfg.sliding_window = 0;
  cfg.sliding_layers.clear();
  if (r.has("sliding_window")) {
    cfg.sliding_window = r.get_int("sliding_window");
    r.require_range("sliding_window", cfg.sliding_window, 1, lim::kMaxPositions);
    cfg.sliding_layers.assign(static_cast<size_t>(cfg.num_layers), true);
  }
}

CheckpointDecls mixtral_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_attention_projections(t, p + "self_attn.", c, false, false);
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "block_sparse_moe.gate.weight", {E, H}, {kExperts, kHidden}, WeightInit::Router));
  }
  t.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings) t.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  // w1 is the gate projection, w3 the up projection, w2 the down projection.
  for (int64_t l = 0; l < c.num_layers; ++l) {
    declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.block_sparse_moe.experts.", l), I, kFfn,
                           {"w1", "w3", "w2"});
  }
  return decls;
}

}  // namespace

const ArchSpec& mixtral_arch() {
  static const ArchSpec spec{"mixtral", parse_mixtral, {"float"}, mixtral_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
