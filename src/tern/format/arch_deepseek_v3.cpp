// DeepSeek-V3 (model_type "deepseek_v3"; DeepSeek-V3/R1, Kimi-K2 share it).
// A decoder with multi-head latent attention (MLA): q through a low-rank
// projection q_b(rmsnorm(q_a x)) (or a plain q_proj when q_lora_rank is
// null), keys and values from one compressed latent per position,
// kv_a_proj_with_mqa x = [latent (kv_lora_rank) | rope key (qk_rope_head_dim)],
// expanded per head by kv_b_proj(rmsnorm(latent)) into k_nope and v; the
// rope part of q and the shared rope key rotate with interleaved pairs
// (rope_interleave) under YaRN, whose mscale_all_dim also scales the
// softmax. The first first_k_dense_replace layers have a dense SwiGLU MLP,
// the others a routed MoE (sigmoid scores, group-limited top-k on score +
// e_score_correction_bias, weights renormalised and times
// routed_scaling_factor) plus n_shared_experts always-on experts as one
// SwiGLU MLP. A checkpoint's multi-token-prediction layer
// (model.layers.{num_hidden_layers}.*) is not part of the model and is
// ignored, as transformers ignores it. Facts: transformers v4.57
// configuration_deepseek_v3.py / modeling_deepseek_v3.py.
#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"

namespace tern {
namespace {

constexpr std::string_view kVocab = "vocab_size", kHidden = "hidden_size", kQRank = "q_lora_rank",
                           kKvRank = "kv_lora_rank", kKvA = "kv_lora_rank + qk_rope_head_dim",
                           kQ = "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)",
                           kKvB = "num_attention_heads x (qk_nope_head_dim + v_head_dim)",
                           kO = "num_attention_heads x v_head_dim";

// transformers' DeepseekV3Config defaults, for fields a config.json may omit.
constexpr int64_t kDefaultQRank = 1536, kDefaultKvRank = 512, kDefaultNope = 128, kDefaultRope = 64,
                  kDefaultV = 128, kDefaultGroups = 8, kDefaultTopkGroup = 4, kDefaultFirstDense = 3,
                  kDefaultShared = 1, kDefaultExperts = 256, kDefaultTopK = 8;
constexpr double kDefaultScaling = 2.5;

void parse_deepseek_v3(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  read_decoder_fields(r, cfg);
  read_norm_rope_fields(r, cfg, 1e-6, 10000.0, 4096);
  if (cfg.rope_scaling && cfg.rope_scaling->type != "default" && cfg.rope_scaling->type != "yarn")
    r.invalid("rope_scaling", fmt::format("has type {}; Tern runs deepseek_v3 with yarn or without scaling",
                                          json_excerpt(cfg.rope_scaling->type)));
  if (cfg.rope_scaling && cfg.rope_scaling->type == "default") cfg.rope_scaling.reset();
  const std::string act = r.get_string("hidden_act", "silu");
  if (act != "silu") r.invalid("hidden_act", fmt::format("is {}; deepseek_v3 uses silu", json_excerpt(act)));

  // Multi-head latent attention. q_lora_rank null means a plain q_proj.
  ModelConfig::Mla& m = cfg.mla;
  const bool q_null = r.raw().contains("q_lora_rank") && r.raw()["q_lora_rank"].is_null();
  m.q_lora_rank = q_null ? 0 : r.get_int("q_lora_rank", kDefaultQRank);
  if (!q_null) r.require_range("q_lora_rank", m.q_lora_rank, 1, lim::kMaxHidden);
  m.kv_lora_rank = r.get_int("kv_lora_rank", kDefaultKvRank);
  r.require_range("kv_lora_rank", m.kv_lora_rank, 1, lim::kMaxHidden);
  m.qk_nope_head_dim = r.get_int("qk_nope_head_dim", kDefaultNope);
  r.require_range("qk_nope_head_dim", m.qk_nope_head_dim, 1, lim::kMaxHeadDim);
  m.qk_rope_head_dim = r.get_int("qk_rope_head_dim", kDefaultRope);
  r.require_range("qk_rope_head_dim", m.qk_rope_head_dim, 2, lim::kMaxHeadDim);
  if (m.qk_rope_head_dim % 2 != 0)
    r.invalid("qk_rope_head_dim", fmt::format("must be even for RoPE, got {}", m.qk_rope_head_dim));
  m.v_head_dim = r.get_int("v_head_dim", kDefaultV);
  r.require_range("v_head_dim", m.v_head_dim, 1, lim::kMaxHeadDim);
  if (m.qk_nope_head_dim + m.qk_rope_head_dim > lim::kMaxHeadDim)
    r.invalid("qk_nope_head_dim", fmt::format("+ qk_rope_head_dim = {} exceeds the limit {}",
                                              m.qk_nope_head_dim + m.qk_rope_head_dim, lim::kMaxHeadDim));
  m.rope_interleave = r.get_bool("rope_interleave", true);
  // Every head has its own keys and values (expanded from the shared latent);
  // head_dim is the query/key width, which sizes the softmax scale.
  cfg.num_kv_heads = cfg.num_heads;
  cfg.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;

  read_grouped_moe_fields(r, cfg, {kDefaultExperts, kDefaultTopK, kDefaultFirstDense, kDefaultShared, kDefaultGroups,
                                   kDefaultTopkGroup, kDefaultScaling});
}

CheckpointDecls deepseek_v3_tensors(const ModelConfig& c, size_t /*layout: one*/) {
  CheckpointDecls decls;
  std::vector<TensorDecl>& t = decls.tensors;
  const ModelConfig::Mla& m = c.mla;
  const int64_t H = c.hidden_size, heads = c.num_heads;
  t.push_back(tensor_decl("model.embed_tokens.weight", {c.vocab_size, H}, {kVocab, kHidden}, WeightInit::Embedding));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l), a = p + "self_attn.";
    t.push_back(tensor_decl(p + "input_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    const int64_t q_dim = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    if (m.q_lora_rank > 0) {
      t.push_back(tensor_decl(a + "q_a_proj.weight", {m.q_lora_rank, H}, {kQRank, kHidden}));
      if (c.attention_bias) t.push_back(tensor_decl(a + "q_a_proj.bias", {m.q_lora_rank}, {kQRank}, WeightInit::Zeros));
      t.push_back(tensor_decl(a + "q_a_layernorm.weight", {m.q_lora_rank}, {kQRank}, WeightInit::Ones));
      t.push_back(tensor_decl(a + "q_b_proj.weight", {q_dim, m.q_lora_rank}, {kQ, kQRank}));
    } else {
      t.push_back(tensor_decl(a + "q_proj.weight", {q_dim, H}, {kQ, kHidden}));
    }
    const int64_t kv_a = m.kv_lora_rank + m.qk_rope_head_dim;
    t.push_back(tensor_decl(a + "kv_a_proj_with_mqa.weight", {kv_a, H}, {kKvA, kHidden}));
    if (c.attention_bias) t.push_back(tensor_decl(a + "kv_a_proj_with_mqa.bias", {kv_a}, {kKvA}, WeightInit::Zeros));
    t.push_back(tensor_decl(a + "kv_a_layernorm.weight", {m.kv_lora_rank}, {kKvRank}, WeightInit::Ones));
    t.push_back(tensor_decl(a + "kv_b_proj.weight", {heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank},
                            {kKvB, kKvRank}));
    t.push_back(tensor_decl(a + "o_proj.weight", {H, heads * m.v_head_dim}, {kHidden, kO}));
    if (c.attention_bias) t.push_back(tensor_decl(a + "o_proj.bias", {H}, {kHidden}, WeightInit::Zeros));
    t.push_back(tensor_decl(p + "post_attention_layernorm.weight", {H}, {kHidden}, WeightInit::Ones));
    declare_grouped_moe_or_dense(t, p + "mlp.", c, l);
  }
  declare_grouped_moe_tail(decls, c);
  return decls;
}

}  // namespace

const ArchSpec& deepseek_v3_arch() {
  static const ArchSpec spec{"deepseek_v3", parse_deepseek_v3, {"float"}, deepseek_v3_tensors, {"gate", "up", "down"}};
  return spec;
}

}  // namespace tern
