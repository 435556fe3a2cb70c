#include "tern/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "tern/core/error.h"

namespace tern {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(SamplerOptions options) : options_(options), rng_(options.seed) {
  if (options_.temperature < 0) fail("temperature must be >= 0, got {}", options_.temperature);
  if (options_.top_p <= 0 || options_.top_p > 1) fail("top-p must be in (0, 1], got {}", options_.top_p);
  if (options_.min_p < 0 || options_.min_p >= 1) fail("min-p must be in [0, 1), got {}", options_.min_p);
  if (options_.top_k < 0) fail("top-k must be >= 0, got {}", options_.top_k);
  if (options_.repetition_penalty <= 0) fail("repetition penalty must be > 0, got {}", options_.repetition_penalty);
  if (!(std::abs(options_.presence_penalty) <= 2)) fail("presence penalty must be in [-2, 2], got {}", options_.presence_penalty);
  if (!(std::abs(options_.frequency_penalty) <= 2))
    fail("frequency penalty must be in [-2, 2], got {}", options_.frequency_penalty);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> context) {
  const int32_t id = draw(logits, context);
  if (options_.presence_penalty != 0.0f || options_.frequency_penalty != 0.0f) {
    auto it = std::find_if(drawn_.begin(), drawn_.end(), [&](const auto& d) { return d.first == id; });
    if (it == drawn_.end()) drawn_.push_back({id, 1});
    else ++it->second;
  }
  return id;
}

int32_t Sampler::draw(std::span<float> logits, std::span<const int32_t> context) {
  // Weights from a corrupt (or hostile) file can give NaN or infinite logits.
  // NaN is never sampled and +inf is the largest float, so the candidate
  // order below stays a strict weak order (std::sort needs one) and the
  // softmax stays finite.
  bool usable = false;
  for (float& l : logits) {
    if (std::isnan(l)) l = -std::numeric_limits<float>::infinity();
    else if (l == std::numeric_limits<float>::infinity()) l = std::numeric_limits<float>::max();
    usable = usable || l > -std::numeric_limits<float>::infinity();
  }
  if (!usable) fail("the model gave no finite logit (NaN or -inf everywhere); its weights may be corrupt");
  if (options_.repetition_penalty != 1.0f) {
    // As in Hugging Face / llama.cpp: divide positive logits, multiply negative ones.
    std::unordered_set<int32_t> seen(context.begin(), context.end());
    for (int32_t id : seen) {
      if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0 ? l / options_.repetition_penalty : l * options_.repetition_penalty;
    }
  }
  for (const auto& [id, count] : drawn_) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    if (l > -std::numeric_limits<float>::infinity())
      l -= options_.frequency_penalty * static_cast<float>(count) + options_.presence_penalty;
  }
  if (options_.greedy || options_.temperature == 0.0f) return argmax(logits);

  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) candidates_.push_back({logits[i], static_cast<int32_t>(i)});
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);
  // Softmax with temperature over the survivors (sorted, descending).
  const float max_logit = candidates_[0].first;
  double total = 0;
  std::vector<double> probs(keep);
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit) / options_.temperature);
    total += probs[i];
  }
  for (auto& p : probs) p /= total;
  size_t n = keep;
  if (options_.min_p > 0) {
    double floor = probs[0] * options_.min_p;
    while (n > 1 && probs[n - 1] < floor) --n;
  }
  if (options_.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i];
      if (cum >= options_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += probs[i];
  double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < n; ++i) {
    r -= probs[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace tern
