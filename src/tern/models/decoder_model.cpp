#include "tern/models/decoder_model.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tern/core/error.h"
#include "tern/core/timeline.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/rope.h"

namespace tern {

DecoderModel::DecoderModel(const TernModel& tm, ExpertCache& cache, ThreadPool* pool, const ModelOptions& opt)
    : cfg_(tm.config()), tm_(tm), cache_(cache), pool_(pool), opt_(opt), w_(tm, opt.verify_trunk) {}

std::string DecoderModel::layer_prefix(int64_t layer) { return fmt::format("model.layers.{}.", layer); }

void DecoderModel::use_plain_rope() {
  if (cfg_.rope_scaling && cfg_.rope_scaling->type != "default")
    fail("rope_scaling type '{}' is not implemented for {}", cfg_.rope_scaling->type, cfg_.architecture);
  inv_freq_ = rope_inv_freq(cfg_.head_dim, cfg_.rope_theta);
  shape_ = default_attention_shape();
}

const float* DecoderModel::norm_weight(const std::string& name) const {
  const float* w = w_.vector(name);
  if (!cfg_.zero_centred_norms) return w;
  const TrunkTensor& t = tm_.trunk_tensor(name);
  std::vector<float>& shifted = shifted_norms_.emplace_back(static_cast<size_t>(t.shape.at(0)));
  for (size_t i = 0; i < shifted.size(); ++i) shifted[i] = 1.0f + w[i];
  return shifted.data();
}

DecoderLayer DecoderModel::layer_with_norms(int64_t l) const {
  const std::string p = layer_prefix(l);
  DecoderLayer layer;
  layer.input_norm = norm_weight(p + "input_layernorm.weight");
  layer.post_norm = norm_weight(p + "post_attention_layernorm.weight");
  return layer;
}

void DecoderModel::load_routed_experts(DecoderLayer& layer, int64_t l, const std::string& router,
                                       bool renormalise) const {
  layer.moe.router = w_.matrix(router);
  layer.moe.routing = {cfg_.num_experts, cfg_.num_experts_per_tok, renormalise, RouterScoring::SoftmaxThenTopK};
  layer.moe.experts = experts_of(l);
  layer.moe.input_norm = layer.post_norm;
}

void DecoderModel::load_moe_with_gated_shared_or_dense(DecoderLayer& L, int64_t l) const {
  const std::string p = layer_prefix(l);
  if (!cfg_.layer_is_moe(l)) return load_dense_mlp(L, p + "mlp.");
  load_routed_experts(L, l, p + "mlp.gate.weight", cfg_.norm_topk_prob);
  L.moe.shared.gate = w_.matrix(p + "mlp.shared_expert.gate_proj.weight");
  L.moe.shared.up = w_.matrix(p + "mlp.shared_expert.up_proj.weight");
  L.moe.shared.down = w_.matrix(p + "mlp.shared_expert.down_proj.weight");
  L.moe.shared.gate_logit = w_.matrix(p + "mlp.shared_expert_gate.weight");
}

void DecoderModel::load_grouped_moe_or_dense(DecoderLayer& L, int64_t l) const {
  const std::string p = layer_prefix(l);
  if (cfg_.layer_is_moe(l)) {
    L.moe.router = w_.matrix(p + "mlp.gate.weight");
    RouterConfig& r = L.moe.routing;
    r.num_experts = cfg_.num_experts;
    r.top_k = cfg_.num_experts_per_tok;
    r.norm_topk_prob = cfg_.norm_topk_prob;
    r.scoring = RouterScoring::SigmoidGrouped;
    r.selection_bias = w_.vector(p + "mlp.gate.e_score_correction_bias");
    r.n_group = cfg_.n_group;
    r.topk_group = cfg_.topk_group;
    r.scaling = static_cast<float>(cfg_.routed_scaling_factor);
    L.moe.experts = experts_of(l);
    L.moe.input_norm = L.post_norm;
    if (cfg_.shared_expert_intermediate_size > 0) {
      L.moe.shared.gate = w_.matrix(p + "mlp.shared_experts.gate_proj.weight");
      L.moe.shared.up = w_.matrix(p + "mlp.shared_experts.up_proj.weight");
      L.moe.shared.down = w_.matrix(p + "mlp.shared_experts.down_proj.weight");
    }
  } else {
    load_dense_mlp(L, p + "mlp.");
  }
}

void DecoderModel::load_attention_projections(AttentionWeights& attn, const std::string& prefix, bool qkv_bias,
                                              bool o_bias) const {
  attn.q = w_.matrix(prefix + "q_proj.weight");
  attn.k = w_.matrix(prefix + "k_proj.weight");
  attn.v = w_.matrix(prefix + "v_proj.weight");
  attn.o = w_.matrix(prefix + "o_proj.weight");
  if (qkv_bias) {
    attn.q_bias = w_.vector(prefix + "q_proj.bias");
    attn.k_bias = w_.vector(prefix + "k_proj.bias");
    attn.v_bias = w_.vector(prefix + "v_proj.bias");
  }
  if (o_bias) attn.o_bias = w_.vector(prefix + "o_proj.bias");
}

void DecoderModel::load_dense_mlp(DecoderLayer& layer, const std::string& prefix) const {
  layer.gate = w_.matrix(prefix + "gate_proj.weight");
  layer.up = w_.matrix(prefix + "up_proj.weight");
  layer.down = w_.matrix(prefix + "down_proj.weight");
}

AttentionShape DecoderModel::default_attention_shape(double scale_factor) const {
  const ModelConfig& c = cfg_;
  return {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, static_cast<float>(c.rms_norm_eps),
          static_cast<float>(scale_factor / std::sqrt(static_cast<double>(c.head_dim))), inv_freq_.data()};
}

const ExpertLayer* DecoderModel::experts_of(int64_t layer) const {
  const ExpertLayer* experts = tm_.manifest().find_expert_layer(layer);
  if (!experts) fail("layer {} is MoE but the container has no experts for it", layer);
  return experts;
}

void DecoderModel::finish_loading() {
  embed_ = w_.matrix("model.embed_tokens.weight");
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : w_.matrix("lm_head.weight");
  final_norm_ = norm_weight("model.norm.weight");
  moe_.clear();
  for (const DecoderLayer& L : layers_) moe_.push_back(L.moe);
  if (const char* path = std::getenv("TERN_PREFETCH_ORACLE"); path && *path) {
    oracle_ = std::make_unique<PrefetchOracle>();
    try {
      oracle_->trace = read_routing_trace(path);
    } catch (const Error& e) {
      fail("TERN_PREFETCH_ORACLE: {}", e.what());
    }
    int64_t moe_layers = 0;
    for (const MoeLayerRef& ref : moe_) oracle_->moe_index.push_back(ref.experts ? moe_layers++ : -1);
    if (oracle_->trace.layers != moe_layers)
      fail("TERN_PREFETCH_ORACLE: {} lists {} MoE layers per token; this model has {}", path,
           oracle_->trace.layers, moe_layers);
  }
}

Lookahead DecoderModel::lookahead(int64_t l, int depth, const float* x) {
  Lookahead la = lookahead_after(moe_, l, depth, x, shape_.norm_eps, opt_.prefetch_margin, &predictions_);
  if (standin_ready_ && !la.next.empty()) {
    // The previous token's attention outputs of layers l+1 .. the nearest MoE layer.
    const int64_t H = cfg_.hidden_size, j = la.next.front()->experts->layer;
    la.standin = standin_attn_.data() + (l + 1) * H;
    if (j > l + 1) {
      standin_sum_.assign(la.standin, la.standin + H);
      for (int64_t k = l + 2; k <= j; ++k) add(standin_sum_.data(), standin_attn_.data() + k * H, standin_sum_.data(), H);
      la.standin = standin_sum_.data();
    }
  }
  if (oracle_ && !positions_.empty()) {
    la.oracle = oracle_.get();
    la.positions = positions_.data();
  }
  return la;
}

void DecoderModel::forward_batch(std::span<const SequenceBatch> sequences, ForwardTrace* trace) {
  layout_batch(sequences, rows_);
  const auto n = static_cast<int64_t>(rows_.tokens.size());
  const int64_t H = cfg_.hidden_size;
  const float eps = shape_.norm_eps;
  float* x = scratch_.get(0, n * H);
  float* xn = scratch_.get(1, n * H);
  float* y = scratch_.get(2, n * H);
  embed_tokens(embed_, rows_.tokens, cfg_.vocab_size, H, x);
  if (cfg_.embedding_scale > 0) scale(x, static_cast<float>(cfg_.embedding_scale), n * H);
  start_trace(trace, cfg_.num_layers);
  positions_.clear();
  if (oracle_ && sequences.size() == 1)
    for (const TokenSlot& s : rows_.slots) positions_.push_back(s.pos);
  // TERN_LOOKAHEAD_STANDIN=0 turns the stand-in off, =1 uses it for every
  // prediction (diagnostics, to measure it and its choice: docs/DESIGN.md).
  static const std::string_view standin_env = [] {
    const char* v = std::getenv("TERN_LOOKAHEAD_STANDIN");
    return std::string_view(v ? v : "");
  }();
  const bool standin_off = standin_env == "0";
  predictions_.always_standin = standin_env == "1";
  const bool one_sequence = sequences.size() == 1 && opt_.prefetch_depth > 0 && !standin_off;
  standin_ready_ = one_sequence && n == 1 && rows_.slots.front().kv == standin_kv_ &&
                   rows_.slots.front().pos == standin_pos_ + 1;
  standin_attn_.resize(static_cast<size_t>(cfg_.num_layers * H));
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    const DecoderLayer& L = layers_[static_cast<size_t>(l)];
    timeline::mark(timeline::kLayer, l, n);
    AttentionShape shape = L.shape ? *L.shape : shape_;
    shape.window = L.window;
    for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.input_norm, H, eps, xn + t * H);
    if (L.mla.present()) mla_attention_forward(L.mla, mla_shape_, xn, rows_.slots, l, y, attn_scratch_, pool_);
    else if (L.deltanet.present())
      gated_deltanet_forward(L.deltanet, deltanet_shape_, xn, rows_.slots, l, y, attn_scratch_, pool_);
    else attention_forward(L.attn, shape, xn, rows_.slots, l, y, attn_scratch_, pool_);
    if (L.attn_out_norm)
      for (int64_t t = 0; t < n; ++t) rmsnorm(y + t * H, L.attn_out_norm, H, eps, y + t * H);
    // Kept for the next token's lookahead; layer l's is no longer needed by this one's.
    if (one_sequence) std::copy(y + (n - 1) * H, y + n * H, standin_attn_.begin() + l * H);
    add(x, y, x, n * H);
    for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * H, L.post_norm, H, eps, xn + t * H);
    if (L.sandwich_out_norm) {
      sandwich_ffn(L, l, n, x, xn, y, trace);
    } else if (L.moe.experts) {
      const Lookahead ahead = lookahead(l, opt_.prefetch_depth, x);
      moe_forward(L.moe, cache_, xn, n, H, y, mlp_scratch_, pool_, &counters_,
                  trace ? &trace->routing[static_cast<size_t>(l)] : nullptr, ffn_, &ahead);
    } else {
      swiglu_mlp(L.gate, L.up, L.down, xn, n, y, mlp_scratch_, pool_);
    }
    add(x, y, x, n * H);
    if (L.layer_scalar != 1.0f) scale(x, L.layer_scalar, n * H);
    if (opt_.prefetch_depth > 0)
      lookahead_refresh(lookahead(l, 1, x), cache_, n, H, mlp_scratch_, pool_);
    trace_hidden(trace, l, x, n * H);
  }
  standin_kv_ = one_sequence ? rows_.slots.back().kv : nullptr;
  standin_pos_ = one_sequence ? rows_.slots.back().pos : -1;
  const auto m = static_cast<int64_t>(rows_.logit_rows.size());
  if (!positions_.empty() && opt_.prefetch_depth > 0)
    oracle_prefetch_token(*oracle_, moe_, opt_.prefetch_depth, positions_.back() + 1, cache_);
  const auto head0 = std::chrono::steady_clock::now();
  timeline::mark(timeline::kHead, m);
  final_logits(lm_head_, final_norm_, eps, x, H, sequences, rows_, xn,
               sequences.size() > 1 ? scratch_.get(3, m * cfg_.vocab_size) : nullptr, pool_,
               static_cast<float>(cfg_.final_logit_softcapping));
  counters_.head_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - head0).count();
  timeline::mark(timeline::kHeadEnd, m);
}

void DecoderModel::sandwich_ffn(const DecoderLayer& L, int64_t l, int64_t n, const float* x, const float* xn,
                                float* y, ForwardTrace* trace) {
  const int64_t H = cfg_.hidden_size;
  const float eps = shape_.norm_eps;
  const GateActivation act = ffn_.activation;
  auto dense = [&] {
    swiglu_mlp(L.gate, L.up, L.down, xn, n, y, dense_scratch_, pool_, act);
    for (int64_t t = 0; t < n; ++t) rmsnorm(y + t * H, L.dense_out_norm, H, eps, y + t * H);
  };
  if (!L.moe.experts) {
    dense();
  } else {
    // The router and the experts read their own normalisations of x; the
    // dense branch runs while the experts' reads are in flight.
    float* xr = scratch_.get(4, n * H);
    float* xe = scratch_.get(5, n * H);
    float* y2 = scratch_.get(6, n * H);
    for (int64_t t = 0; t < n; ++t) {
      rmsnorm(x + t * H, L.moe.input_norm, H, eps, xr + t * H);
      rmsnorm(x + t * H, L.moe_in_norm, H, eps, xe + t * H);
    }
    const Lookahead ahead = lookahead(l, opt_.prefetch_depth, x);
    const MoeSideWork side{xr, dense};
    moe_forward(L.moe, cache_, xe, n, H, y2, mlp_scratch_, pool_, &counters_,
                trace ? &trace->routing[static_cast<size_t>(l)] : nullptr, ffn_, &ahead, &side);
    for (int64_t t = 0; t < n; ++t) rmsnorm(y2 + t * H, L.moe_out_norm, H, eps, y2 + t * H);
    add(y, y2, y, n * H);
  }
  for (int64_t t = 0; t < n; ++t) rmsnorm(y + t * H, L.sandwich_out_norm, H, eps, y + t * H);
}

}  // namespace tern
