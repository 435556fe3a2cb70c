#include "tern/models/moe_block.h"

#include <algorithm>
#include <map>

#include "tern/core/error.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"

namespace tern {

namespace {
enum Slot { kLogits = 0, kProbs, kGate, kUp, kAct, kIn, kDown };
}

Routing route_tokens(const float* logits, int64_t n, const RouterConfig& cfg, float* probs) {
  const int64_t E = cfg.num_experts, K = cfg.top_k;
  Routing r;
  r.experts.resize(static_cast<size_t>(n * K));
  r.weights.resize(static_cast<size_t>(n * K));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    std::copy(logits + t * E, logits + (t + 1) * E, probs);
    if (cfg.scoring == RouterScoring::SoftmaxThenTopK) softmax(probs, E);
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
      return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    });
    int32_t* experts = &r.experts[static_cast<size_t>(t * K)];
    float* weights = &r.weights[static_cast<size_t>(t * K)];
    for (int64_t j = 0; j < K; ++j) {
      experts[j] = order[static_cast<size_t>(j)];
      weights[j] = probs[experts[j]];
    }
    if (cfg.scoring == RouterScoring::TopKThenSoftmax) {
      softmax(weights, K);
    } else if (cfg.norm_topk_prob) {
      float sum = 0;
      for (int64_t j = 0; j < K; ++j) sum += weights[j];
      for (int64_t j = 0; j < K; ++j) weights[j] /= sum;
    }
  }
  return r;
}

void swiglu_mlp(const WeightView& gate, const WeightView& up, const WeightView& down, const float* x,
                int64_t n, float* out, Scratch& scratch, ThreadPool* pool) {
  const int64_t I = gate.rows;
  float* g = scratch.get(kGate, n * I);
  float* u = scratch.get(kUp, n * I);
  matmul(gate, x, n, g, pool);
  matmul(up, x, n, u, pool);
  swiglu(g, u, g, n * I);
  matmul(down, g, n, out, pool);
}

namespace {

void add_rows(float* y, const float* bias, int64_t n, int64_t dim) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) add(y + t * dim, bias, y + t * dim, dim);
}

// One expert over m tokens: out [m, hidden].
void expert_ffn(const WeightView& gate, const WeightView& up, const WeightView& down, const float* gate_bias,
                const float* up_bias, const float* down_bias, const ExpertFfn& ffn, const float* x, int64_t m,
                float* out, Scratch& scratch, ThreadPool* pool) {
  const int64_t I = gate.rows;
  float* g = scratch.get(kGate, m * I);
  float* u = scratch.get(kUp, m * I);
  matmul(gate, x, m, g, pool);
  matmul(up, x, m, u, pool);
  add_rows(g, gate_bias, m, I);
  add_rows(u, up_bias, m, I);
  if (ffn.swiglu_limit > 0) swiglu_clamped(g, u, g, m * I, ffn.swiglu_limit, ffn.swiglu_alpha);
  else swiglu(g, u, g, m * I);
  matmul(down, g, m, out, pool);
  add_rows(out, down_bias, m, down.rows);
}

}  // namespace

void moe_forward(const WeightView& router, const RouterConfig& cfg, const ExpertLayer& layer,
                 ExpertCache& cache, const float* x, int64_t n, int64_t hidden, float* out,
                 Scratch& scratch, ThreadPool* pool, MoeCounters* counters, Routing* routing_out,
                 const ExpertFfn& ffn) {
  const int64_t E = cfg.num_experts, K = cfg.top_k;
  float* logits = scratch.get(kLogits, n * E);
  matmul(router, x, n, logits, pool);
  add_rows(logits, cfg.bias, n, E);
  Routing routing = route_tokens(logits, n, cfg, scratch.get(kProbs, E));

  // Tokens per expert, experts ascending.
  std::map<int32_t, std::vector<std::pair<int64_t, float>>> by_expert;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < K; ++j)
      by_expert[routing.experts[static_cast<size_t>(t * K + j)]].push_back(
          {t, routing.weights[static_cast<size_t>(t * K + j)]});

  const ExpertSection* gs = layer.find_section("gate");
  const ExpertSection* us = layer.find_section("up");
  const ExpertSection* ds = layer.find_section("down");
  if (!gs || !us || !ds) fail("layer {}: expert records lack gate/up/down sections", layer.layer);
  // Optional F32 biases (gpt_oss).
  const ExpertSection* gbs = layer.find_section("gate_bias");
  const ExpertSection* ubs = layer.find_section("up_bias");
  const ExpertSection* dbs = layer.find_section("down_bias");
  for (const ExpertSection* b : {gbs, ubs, dbs})
    if (b && b->format != TensorFormat::F32) fail("layer {}: expert section {} must be F32", layer.layer, b->name);
  auto bias = [](const uint8_t* rec, const ExpertSection* s) {
    return s ? reinterpret_cast<const float*>(rec + s->offset) : nullptr;
  };

  std::fill(out, out + n * hidden, 0.0f);
  std::vector<std::pair<int32_t, const std::vector<std::pair<int64_t, float>>*>> list;
  for (const auto& [e, toks] : by_expert) list.push_back({e, &toks});
  // Experts are acquired (read if missing) up to top_k at a time, then used.
  std::vector<ExpertCache::Handle> handles;
  for (size_t first = 0; first < list.size(); first += static_cast<size_t>(K)) {
    size_t last = std::min(list.size(), first + static_cast<size_t>(K));
    handles.clear();
    for (size_t i = first; i < last; ++i) handles.push_back(cache.acquire(layer, list[i].first));
    for (size_t i = first; i < last; ++i) {
      const uint8_t* rec = handles[i - first].data();
      const auto& toks = *list[i].second;
      const auto m = static_cast<int64_t>(toks.size());
      WeightView gate{rec + gs->offset, gs->format, gs->shape[0], gs->shape[1]};
      WeightView up{rec + us->offset, us->format, us->shape[0], us->shape[1]};
      WeightView down{rec + ds->offset, ds->format, ds->shape[0], ds->shape[1]};
      float* xin = scratch.get(kIn, m * hidden);
      for (int64_t r = 0; r < m; ++r)
        std::copy(x + toks[static_cast<size_t>(r)].first * hidden, x + (toks[static_cast<size_t>(r)].first + 1) * hidden,
                  xin + r * hidden);
      float* y = scratch.get(kDown, m * hidden);
      expert_ffn(gate, up, down, bias(rec, gbs), bias(rec, ubs), bias(rec, dbs), ffn, xin, m, y, scratch, pool);
      for (int64_t r = 0; r < m; ++r) {
        const auto& [t, wgt] = toks[static_cast<size_t>(r)];
        axpy(wgt, y + r * hidden, out + t * hidden, hidden);
      }
    }
  }
  if (counters) {
    counters->experts_needed += static_cast<uint64_t>(n * K);
    counters->experts_loaded += list.size();
  }
  if (routing_out) *routing_out = std::move(routing);
}

}  // namespace tern
