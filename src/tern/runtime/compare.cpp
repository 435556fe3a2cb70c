#include "tern/runtime/compare.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tern/core/error.h"

namespace tern {

namespace {

// log-softmax in double.
std::vector<double> log_probs(const float* logits, int64_t n) {
  double mx = *std::max_element(logits, logits + n), sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  double lse = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(logits[i]) - lse;
  return out;
}

}  // namespace

nlohmann::json ModelComparison::to_json() const {
  nlohmann::json ls = nlohmann::json::array();
  for (const auto& l : layers)
    ls.push_back({{"layer", l.layer},
                  {"relative_error", l.relative_error},
                  {"min_cosine", l.min_cosine},
                  {"mean_cosine", l.mean_cosine},
                  {"router_mismatch", l.router_mismatch < 0 ? nlohmann::json(nullptr) : nlohmann::json(l.router_mismatch)}});
  return {{"positions", positions}, {"mean_kl", mean_kl}, {"max_kl", max_kl}, {"top1_agreement", top1_agreement},
          {"layers", ls}};
}

ModelComparison compare_models(Engine& a, Engine& b, std::span<const int32_t> tokens) {
  const ModelConfig& ca = a.config();
  const ModelConfig& cb = b.config();
  if (ca.architecture != cb.architecture || ca.num_layers != cb.num_layers || ca.hidden_size != cb.hidden_size ||
      ca.vocab_size != cb.vocab_size || ca.num_experts != cb.num_experts)
    fail("the two models differ in architecture or shape; compare needs two installs of the same model");
  Session sa(a), sb(b);
  ForwardTrace ta, tb;
  std::vector<float> la = sa.feed(tokens, true, &ta);
  std::vector<float> lb = sb.feed(tokens, true, &tb);
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t H = ca.hidden_size, V = ca.vocab_size, K = ca.num_experts_per_tok;

  ModelComparison r;
  r.positions = n;
  for (int64_t l = 0; l < ca.num_layers; ++l) {
    const auto& ha = ta.hidden[static_cast<size_t>(l)];
    const auto& hb = tb.hidden[static_cast<size_t>(l)];
    LayerComparison lc;
    lc.layer = l;
    double diff2 = 0, norm2 = 0, cos_sum = 0, cos_min = 1;
    for (int64_t t = 0; t < n; ++t) {
      double dot = 0, na = 0, nb = 0;
      for (int64_t i = 0; i < H; ++i) {
        double x = ha[static_cast<size_t>(t * H + i)], y = hb[static_cast<size_t>(t * H + i)];
        diff2 += (x - y) * (x - y);
        norm2 += x * x;
        dot += x * y;
        na += x * x;
        nb += y * y;
      }
      double c = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 1;
      cos_sum += c;
      cos_min = std::min(cos_min, c);
    }
    lc.relative_error = norm2 > 0 ? std::sqrt(diff2 / norm2) : 0;
    lc.mean_cosine = cos_sum / static_cast<double>(n);
    lc.min_cosine = cos_min;
    const auto& ra = ta.routing[static_cast<size_t>(l)].experts;
    const auto& rb = tb.routing[static_cast<size_t>(l)].experts;
    if (ra.empty()) {
      lc.router_mismatch = -1;
    } else {
      int64_t differ = 0;
      for (int64_t t = 0; t < n; ++t) {
        std::set<int32_t> sa_set(ra.begin() + t * K, ra.begin() + (t + 1) * K);
        for (int64_t j = 0; j < K; ++j) differ += sa_set.count(rb[static_cast<size_t>(t * K + j)]) ? 0 : 1;
      }
      lc.router_mismatch = static_cast<double>(differ) / static_cast<double>(n * K);
    }
    r.layers.push_back(lc);
  }
  double kl_sum = 0;
  int64_t agree = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* xa = la.data() + t * V;
    const float* xb = lb.data() + t * V;
    auto pa = log_probs(xa, V), pb = log_probs(xb, V);
    double kl = 0;
    for (int64_t i = 0; i < V; ++i)
      kl += std::exp(pa[static_cast<size_t>(i)]) * (pa[static_cast<size_t>(i)] - pb[static_cast<size_t>(i)]);
    kl_sum += kl;
    r.max_kl = std::max(r.max_kl, kl);
    agree += std::max_element(xa, xa + V) - xa == std::max_element(xb, xb + V) - xb ? 1 : 0;
  }
  r.mean_kl = kl_sum / static_cast<double>(n);
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(n);
  return r;
}

}  // namespace tern
