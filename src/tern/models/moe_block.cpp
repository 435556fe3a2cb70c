#include "tern/models/moe_block.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "tern/core/error.h"
#include "tern/core/timeline.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"

namespace tern {

namespace {
enum Slot { kLogits = 0, kProbs, kGate, kUp, kAct, kIn, kDown, kOut, kPredict, kNormed, kShared, kSharedGate, kStandin };
}

namespace {

// Keeps the topk_group best of n_group equal groups of `choice` (a group's
// score: the sum of its two best; ties go to the lower group) and sets the
// other groups' scores to 0, as transformers' masked_fill does.
void select_expert_groups(float* choice, int64_t E, int64_t n_group, int64_t topk_group, float* group_score,
                          int32_t* group_order) {
  const int64_t size = E / n_group;
  for (int64_t g = 0; g < n_group; ++g) {
    const float* c = choice + g * size;
    float best = -INFINITY, second = -INFINITY;
    for (int64_t i = 0; i < size; ++i) {
      if (c[i] > best) {
        second = best;
        best = c[i];
      } else if (c[i] > second) {
        second = c[i];
      }
    }
    group_score[g] = best + second;
    group_order[g] = static_cast<int32_t>(g);
  }
  std::partial_sort(group_order, group_order + topk_group, group_order + n_group, [&](int32_t a, int32_t b) {
    return group_score[a] > group_score[b] || (group_score[a] == group_score[b] && a < b);
  });
  std::sort(group_order, group_order + topk_group);
  for (int64_t g = 0, kept = 0; g < n_group; ++g) {
    if (kept < topk_group && group_order[kept] == g) {
      ++kept;
      continue;
    }
    std::fill(choice + g * size, choice + (g + 1) * size, 0.0f);
  }
}

}  // namespace

Routing route_tokens(const float* logits, int64_t n, const RouterConfig& cfg, float* probs) {
  const int64_t E = cfg.num_experts, K = cfg.top_k;
  Routing r;
  r.experts.resize(static_cast<size_t>(n * K));
  r.weights.resize(static_cast<size_t>(n * K));
  std::vector<int32_t> order(static_cast<size_t>(E));
  const bool grouped = cfg.scoring == RouterScoring::SigmoidGrouped;
  std::vector<float> choice(grouped ? static_cast<size_t>(E) : 0);
  std::vector<float> group_score(grouped ? static_cast<size_t>(cfg.n_group) : 0);
  std::vector<int32_t> group_order(group_score.size());
  for (int64_t t = 0; t < n; ++t) {
    std::copy(logits + t * E, logits + (t + 1) * E, probs);
    if (cfg.scoring == RouterScoring::SoftmaxThenTopK) softmax(probs, E);
    // What the top-k ranks: the probabilities, or DeepSeek's choice scores.
    const float* rank = probs;
    if (grouped) {
      for (int64_t e = 0; e < E; ++e) {
        probs[e] = 1.0f / (1.0f + std::exp(-probs[e]));
        choice[static_cast<size_t>(e)] = probs[e] + (cfg.selection_bias ? cfg.selection_bias[e] : 0.0f);
      }
      select_expert_groups(choice.data(), E, cfg.n_group, cfg.topk_group, group_score.data(), group_order.data());
      rank = choice.data();
    }
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
      return rank[a] > rank[b] || (rank[a] == rank[b] && a < b);
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
      float sum = grouped ? 1e-20f : 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += weights[j];
      for (int64_t j = 0; j < K; ++j) weights[j] /= sum;
    }
    if (grouped)
      for (int64_t j = 0; j < K; ++j) weights[j] *= cfg.scaling;
    if (cfg.expert_scale)
      for (int64_t j = 0; j < K; ++j) weights[j] *= cfg.expert_scale[experts[j]];
  }
  return r;
}

void swiglu_mlp(const WeightView& gate, const WeightView& up, const WeightView& down, const float* x,
                int64_t n, float* out, Scratch& scratch, ThreadPool* pool, GateActivation activation) {
  const int64_t I = gate.rows;
  float* g = scratch.get(kGate, n * I);
  float* u = scratch.get(kUp, n * I);
  matmul(gate, x, n, g, pool);
  matmul(up, x, n, u, pool);
  if (activation == GateActivation::GeluTanh) geglu_tanh(g, u, g, n * I);
  else swiglu(g, u, g, n * I);
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
  else if (ffn.activation == GateActivation::GeluTanh) geglu_tanh(g, u, g, m * I);
  else swiglu(g, u, g, m * I);
  matmul(down, g, m, out, pool);
  add_rows(out, down_bias, m, down.rows);
}

}  // namespace

Lookahead lookahead_after(const std::vector<MoeLayerRef>& layers, int64_t l, int depth, const float* residual,
                          float norm_eps, int64_t margin, Predictions* predictions) {
  Lookahead la;
  la.predictions = predictions;
  la.residual = residual;
  la.norm_eps = norm_eps;
  la.margin = margin;
  for (size_t j = static_cast<size_t>(l) + 1; j < layers.size() && static_cast<int>(la.next.size()) < depth; ++j)
    if (layers[j].experts) la.next.push_back(&layers[j]);
  return la;
}

namespace {

// Prefetches each next layer's predicted experts for every token, nearest
// layer first, and tells the cache which experts are predicted (the
// lookahead policy keeps them, with the current layer's).
void prefetch_ahead(const Lookahead& la, const MoeLayerRef* current, const std::vector<int32_t>& needed, int64_t n,
                    int64_t hidden, ExpertCache& cache, Scratch& scratch, ThreadPool* pool) {
  std::vector<uint64_t> keep;
  // (class, layer, expert): each predicted expert once, at its best class
  // (prediction_rank: nearer layers and the router's higher picks first).
  std::map<std::pair<const ExpertLayer*, int32_t>, int> wanted;
  for (int32_t e : needed) keep.push_back(ExpertCache::key(current->experts->layer, e));
  float* xn = scratch.get(kNormed, n * hidden);
  int distance = 0;
  for (const MoeLayerRef* next : la.next) {
    const RouterConfig& rc = next->routing;
    RouterConfig wide = rc;
    wide.top_k = std::min(rc.num_experts, rc.top_k + la.margin);
    auto predict = [&](const float* residual) {
      for (int64_t t = 0; t < n; ++t) rmsnorm(residual + t * hidden, next->input_norm, hidden, la.norm_eps, xn + t * hidden);
      float* logits = scratch.get(kPredict, n * rc.num_experts);
      matmul(next->router, xn, n, logits, pool);
      add_rows(logits, rc.bias, n, rc.num_experts);
      return route_tokens(logits, n, wide, scratch.get(kProbs, rc.num_experts));
    };
    Routing predicted = predict(la.residual);
    std::vector<int32_t> rival;
    bool chose_standin = false;
    if (distance == 0 && la.standin && n == 1 && la.predictions) {
      float* stood = scratch.get(kStandin, hidden);
      for (int64_t i = 0; i < hidden; ++i) stood[i] = la.residual[i] + la.standin[i];
      Routing other = predict(stood);
      chose_standin = la.predictions->prefer_standin(static_cast<size_t>(next->experts->layer));
      if (chose_standin) std::swap(predicted.experts, other.experts);
      rival = std::move(other.experts);
    }
    if (la.oracle) {
      // Every row's true experts replace the guess where the trace has them.
      std::vector<int32_t> truth;
      for (int64_t t = 0; t < n; ++t) {
        const std::span<const int32_t> e = la.oracle->experts(la.positions[t], next->experts->layer);
        if (static_cast<int64_t>(e.size()) != rc.top_k) break;
        truth.insert(truth.end(), e.begin(), e.end());
      }
      if (static_cast<int64_t>(truth.size()) == n * rc.top_k) {
        predicted.experts = std::move(truth);
        wide.top_k = rc.top_k;
        rival.clear();
      }
    }
    if (la.predictions) {
      const auto layer = static_cast<size_t>(next->experts->layer);
      Predictions& p = *la.predictions;
      if (p.experts.size() <= layer) p.resize(layer + 1);
      p.experts[layer] = predicted.experts;  // the latest prediction is scored
      p.width[layer] = wide.top_k;
      p.rival[layer] = std::move(rival);
      p.chose_standin[layer] = chose_standin ? 1 : 0;
    }
    for (size_t i = 0; i < predicted.experts.size(); ++i) {
      const int32_t e = predicted.experts[i];
      keep.push_back(ExpertCache::key(next->experts->layer, e));
      const int rank = ExpertCache::prediction_rank(distance, static_cast<int64_t>(i) % wide.top_k, n > 1);
      auto [it, added] = wanted.try_emplace({next->experts, e}, rank);
      if (!added) it->second = std::min(it->second, rank);
    }
    ++distance;
  }
  if (current) cache.set_protected(keep);
  else cache.add_protected(keep);
  std::vector<std::tuple<int, int64_t, int32_t, const ExpertLayer*>> order;
  for (const auto& [le, rank] : wanted) order.emplace_back(rank, le.first->layer, le.second, le.first);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) < std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  for (const auto& [rank, l, e, layer] : order) cache.prefetch(*layer, e, rank);
}

}  // namespace

void Predictions::resize(size_t layers) {
  experts.resize(layers);
  width.resize(layers);
  rival.resize(layers);
  score.resize(layers, {0.0, 0.0});
  chose_standin.resize(layers, 0);
}

std::span<const int32_t> PrefetchOracle::experts(int64_t pos, int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(moe_index.size()) || moe_index[static_cast<size_t>(layer)] < 0 ||
      pos < 0 || pos >= trace.tokens())
    return {};
  return trace.batch(pos, moe_index[static_cast<size_t>(layer)]);
}

void oracle_prefetch_token(const PrefetchOracle& oracle, const std::vector<MoeLayerRef>& layers, int depth,
                           int64_t position, ExpertCache& cache) {
  int distance = 0;
  for (const MoeLayerRef& ref : layers) {
    if (distance >= depth) break;
    if (!ref.experts) continue;
    const std::span<const int32_t> e = oracle.experts(position, ref.experts->layer);
    for (size_t i = 0; i < e.size(); ++i)
      cache.prefetch(*ref.experts, e[i], ExpertCache::prediction_rank(distance, static_cast<int64_t>(i)));
    ++distance;
  }
}

void lookahead_refresh(const Lookahead& la, ExpertCache& cache, int64_t n, int64_t hidden, Scratch& scratch,
                       ThreadPool* pool) {
  if (la.next.empty()) return;
  Lookahead nearest = la;
  nearest.next.resize(1);
  prefetch_ahead(nearest, nullptr, {}, n, hidden, cache, scratch, pool);
}

void moe_forward(const MoeLayerRef& ref, ExpertCache& cache, const float* x, int64_t n, int64_t hidden, float* out,
                 Scratch& scratch, ThreadPool* pool, MoeCounters* counters, Routing* routing_out,
                 const ExpertFfn& ffn, const Lookahead* lookahead, const MoeSideWork* side) {
  const RouterConfig& cfg = ref.routing;
  const ExpertLayer& layer = *ref.experts;
  const int64_t E = cfg.num_experts, K = cfg.top_k;
  float* logits = scratch.get(kLogits, n * E);
  matmul(ref.router, side && side->router_x ? side->router_x : x, n, logits, pool);
  add_rows(logits, cfg.bias, n, E);
  Routing routing = route_tokens(logits, n, cfg, scratch.get(kProbs, E));
  timeline::mark(timeline::kMoe, layer.layer, n);
  if (lookahead && lookahead->predictions && counters) {
    // Score what an earlier layer predicted for this one, then forget it.
    auto& pred = lookahead->predictions->experts;
    const auto l = static_cast<size_t>(layer.layer);
    if (l < pred.size() && !pred[l].empty()) {
      const int64_t w = lookahead->predictions->width[l];
      Predictions& p = *lookahead->predictions;
      auto hits = [&](const std::vector<int32_t>& guess) {
        int64_t h = 0;
        for (int64_t t = 0; t < n; ++t)
          for (int64_t j = 0; j < K; ++j) {
            const int32_t e = routing.experts[static_cast<size_t>(t * K + j)];
            const auto* first = &guess[static_cast<size_t>(t * w)];
            h += std::find(first, first + w, e) != first + w ? 1 : 0;
          }
        return h;
      };
      if (static_cast<int64_t>(pred[l].size()) == n * w) {
        const int64_t h = hits(pred[l]);
        counters->predicted_hits += static_cast<uint64_t>(h);
        counters->predicted_needed += static_cast<uint64_t>(n * K);
        if (p.rival[l].size() == pred[l].size()) {
          // Both predictors scored on this layer, recent tokens weighing most.
          constexpr double kDecay = 0.95;
          const int chosen = p.chose_standin[l] ? 1 : 0;
          p.score[l][chosen] = kDecay * p.score[l][chosen] + static_cast<double>(h);
          p.score[l][1 - chosen] = kDecay * p.score[l][1 - chosen] + static_cast<double>(hits(p.rival[l]));
        }
      }
      pred[l].clear();
      p.rival[l].clear();
    }
  }

  // Tokens per expert, experts ascending; each expert's outputs get rows
  // [first_row, first_row + tokens) of one buffer.
  std::map<int32_t, std::vector<std::pair<int64_t, float>>> by_expert;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < K; ++j)
      by_expert[routing.experts[static_cast<size_t>(t * K + j)]].push_back(
          {t, routing.weights[static_cast<size_t>(t * K + j)]});
  struct Job {
    int32_t expert;
    const std::vector<std::pair<int64_t, float>>* tokens;
    int64_t first_row;
    ExpertCache::Handle handle;
    bool done = false;
  };
  std::vector<Job> jobs;
  std::vector<int32_t> needed;
  int64_t rows = 0;
  for (const auto& [e, toks] : by_expert) {
    jobs.push_back({e, &toks, rows, {}, false});
    needed.push_back(e);
    rows += static_cast<int64_t>(toks.size());
  }

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

  // Request every expert (reads start now), as many as the budget holds; the
  // resident ones first, so a miss never evicts an expert this batch needs.
  std::stable_partition(jobs.begin(), jobs.end(), [&](const Job& j) { return cache.contains(layer.layer, j.expert); });
  size_t requested = 0;
  auto request_more = [&] {
    while (requested < jobs.size()) {
      ExpertCache::Handle h = cache.request(layer, jobs[requested].expert);
      if (!h) break;
      jobs[requested++].handle = std::move(h);
    }
  };
  request_more();
  if (requested == 0) cache.acquire(layer, jobs[0].expert);  // fails clearly: the budget cannot hold one expert
  if (lookahead && !lookahead->next.empty()) prefetch_ahead(*lookahead, &ref, needed, n, hidden, cache, scratch, pool);
  // The shared expert while the reads are in flight: out is zeroed below, so
  // its result waits in its own buffer, gated per token.
  float* shared = nullptr;
  if (ref.shared.present()) {
    shared = scratch.get(kShared, n * hidden);
    swiglu_mlp(ref.shared.gate, ref.shared.up, ref.shared.down, x, n, shared, scratch, pool);
    if (ref.shared.gate_logit.data) {
      float* g = scratch.get(kSharedGate, n);
      matmul(ref.shared.gate_logit, x, n, g, pool);
      for (int64_t t = 0; t < n; ++t) scale(shared + t * hidden, 1.0f / (1.0f + std::exp(-g[t])), hidden);
    }
  }
  if (side && side->while_reading) side->while_reading();

  float* y_all = scratch.get(kOut, rows * hidden);
  size_t remaining = jobs.size();
  while (remaining > 0) {
    // The first requested expert that is ready, else the first still loading.
    Job* job = nullptr;
    for (size_t i = 0; i < requested && !job; ++i)
      if (!jobs[i].done && cache.ready(jobs[i].handle)) job = &jobs[i];
    for (size_t i = 0; i < requested && !job; ++i)
      if (!jobs[i].done) job = &jobs[i];
    const uint8_t* rec = cache.wait(job->handle);
    const auto& toks = *job->tokens;
    const auto m = static_cast<int64_t>(toks.size());
    WeightView gate{rec + gs->offset, gs->format, gs->shape[0], gs->shape[1]};
    WeightView up{rec + us->offset, us->format, us->shape[0], us->shape[1]};
    WeightView down{rec + ds->offset, ds->format, ds->shape[0], ds->shape[1]};
    float* xin = scratch.get(kIn, m * hidden);
    for (int64_t r = 0; r < m; ++r)
      std::copy(x + toks[static_cast<size_t>(r)].first * hidden, x + (toks[static_cast<size_t>(r)].first + 1) * hidden,
                xin + r * hidden);
    expert_ffn(gate, up, down, bias(rec, gbs), bias(rec, ubs), bias(rec, dbs), ffn, xin, m,
               y_all + job->first_row * hidden, scratch, pool);
    job->done = true;
    job->handle = ExpertCache::Handle();  // its budget can serve the next request
    --remaining;
    request_more();
  }
  // Combine in ascending expert id, whatever order the experts were requested and computed in.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.expert < b.expert; });
  std::fill(out, out + n * hidden, 0.0f);
  for (const Job& job : jobs)
    for (size_t r = 0; r < job.tokens->size(); ++r) {
      const auto& [t, wgt] = (*job.tokens)[r];
      axpy(wgt, y_all + (job.first_row + static_cast<int64_t>(r)) * hidden, out + t * hidden, hidden);
    }
  if (shared) add(out, shared, out, n * hidden);
  if (counters) {
    counters->experts_needed += static_cast<uint64_t>(n * K);
    counters->experts_loaded += jobs.size();
  }
  if (routing_out) *routing_out = std::move(routing);
  timeline::mark(timeline::kMoeEnd, layer.layer, n);
}

}  // namespace tern
