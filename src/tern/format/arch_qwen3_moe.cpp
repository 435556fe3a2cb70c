// Qwen3-MoE (model_type "qwen3_moe"): Llama-style decoder with per-head
// q/k RMSNorm, GQA, and a top-k routed SwiGLU mixture of experts in every
// `decoder_sparse_step`-th layer that is not listed in `mlp_only_layers`.
#include "tern/core/error.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

// The config.json fields behind each dimension (TensorDecl::dim_fields).
constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kHeadDim = "head_dim",
                           kQ = "num_attention_heads x head_dim", kKv = "num_key_value_heads x head_dim",
                           kFfn = "intermediate_size", kExperts = "num_experts", kMoeFfn = "moe_intermediate_size";

void parse_qwen3_moe(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  cfg.intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.intermediate_size, 1, lim::kMaxFfn);
  cfg.num_experts = r.get_int("num_experts");
  r.require_range("num_experts", cfg.num_experts, 0, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("num_experts_per_tok");
  cfg.moe_intermediate_size = r.get_int("moe_intermediate_size");
  cfg.norm_topk_prob = r.get_bool("norm_topk_prob", false);
  cfg.decoder_sparse_step = r.get_int("decoder_sparse_step", 1);
  cfg.mlp_only_layers = r.get_int_list("mlp_only_layers");
  // Bounded even without experts (a config with num_experts 0 still sizes
  // scratch estimates from them).
  r.require_range("num_experts_per_tok", cfg.num_experts_per_tok, 0, lim::kMaxExperts);
  r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 0, lim::kMaxFfn);
  if (cfg.num_experts > 0) {
    r.require_positive("num_experts_per_tok", cfg.num_experts_per_tok);
    r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
    if (cfg.num_experts_per_tok > cfg.num_experts)
      r.invalid("num_experts_per_tok", fmt::format("({}) exceeds num_experts ({})",
                                                   cfg.num_experts_per_tok, cfg.num_experts));
  }
  r.require_range("decoder_sparse_step", cfg.decoder_sparse_step, 1, lim::kMaxLayers);
  if (static_cast<int64_t>(cfg.mlp_only_layers.size()) > cfg.num_layers)
    r.invalid("mlp_only_layers", fmt::format("lists {} layers but the model has {}", cfg.mlp_only_layers.size(),
                                             cfg.num_layers));
  for (int64_t l : cfg.mlp_only_layers)
    if (l < 0 || l >= cfg.num_layers)
      r.invalid("mlp_only_layers", fmt::format("names layer {} but the model has {} layers", l, cfg.num_layers));
  if (r.has("sliding_window") && r.get_bool("use_sliding_window", false))
    r.invalid("use_sliding_window", "is true; sliding-window attention is not supported for qwen3_moe");
}

CheckpointDecls qwen3_moe_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t q_dim = c.num_heads * D, kv_dim = c.num_kv_heads * D;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    t.push_back(tensor_decl(p + "self_attn.q_proj.weight", {q_dim, H}, {kQ, kHidden}));
    t.push_back(tensor_decl(p + "self_attn.k_proj.weight", {kv_dim, H}, {kKv, kHidden}));
    t.push_back(tensor_decl(p + "self_attn.v_proj.weight", {kv_dim, H}, {kKv, kHidden}));
    t.push_back(tensor_decl(p + "self_attn.o_proj.weight", {H, q_dim}, {kHidden, kQ}));
    if (c.attention_bias) {
      t.push_back(tensor_decl(p + "self_attn.q_proj.bias", {q_dim}, {kQ}, WeightInit::Zeros));
      t.push_back(tensor_decl(p + "self_attn.k_proj.bias", {kv_dim}, {kKv}, WeightInit::Zeros));
      t.push_back(tensor_decl(p + "self_attn.v_proj.bias", {kv_dim}, {kKv}, WeightInit::Zeros));
      t.push_back(tensor_decl(p + "self_attn.o_proj.bias", {H}, {kHidden}, WeightInit::Zeros));
    }
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
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string p = fmt::format("model.layers.{}.mlp.experts.{}.", l, e);
      auto add = [&](const char* section, const char* proj, std::vector<int64_t> shape,
                     std::vector<std::string_view> fields) {
        std::string name = p + proj + ".weight";
        TensorDecl d = tensor_decl(name, shape, fields);
        d.is_expert = true;
        t.push_back(std::move(d));
        SectionSource source;
        source.tensor = std::move(name);
        decls.sections.push_back({l, e, section, std::move(shape), std::move(fields), std::move(source)});
      };
      add("gate", "gate_proj", {I, H}, {kMoeFfn, kHidden});
      add("up", "up_proj", {I, H}, {kMoeFfn, kHidden});
      add("down", "down_proj", {H, I}, {kHidden, kMoeFfn});
    }
  }
  return decls;
}

}  // namespace

const ArchSpec& qwen3_moe_arch() {
  static const ArchSpec spec{"qwen3_moe", parse_qwen3_moe, {"float"}, qwen3_moe_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
