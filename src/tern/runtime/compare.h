#pragma once
// compare_models — judges one install of a model against another (e.g. a
// quantized install against the unquantized one) on the same tokens: per
// layer, the relative error and cosine similarity of the residual stream and
// the fraction of router top-k choices that differ; at the output, the KL
// divergence of next-token distributions and top-1 agreement.
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/runtime/engine.h"

namespace tern {

struct LayerComparison {
  int64_t layer = 0;
  double relative_error = 0;  // ||b - a|| / ||a|| over all positions
  double min_cosine = 1;      // worst position
  double mean_cosine = 1;
  double router_mismatch = 0;  // fraction of (token, slot) choices in b absent from a's top-k; -1 for dense
};

struct ModelComparison {
  std::vector<LayerComparison> layers;
  double mean_kl = 0;  // KL(a || b) of next-token distributions, nats, mean over positions
  double max_kl = 0;
  double top1_agreement = 0;  // fraction of positions with the same argmax
  int64_t positions = 0;
  nlohmann::json to_json() const;
};

// `reference` is the baseline (a), `candidate` the model judged (b).
ModelComparison compare_models(Engine& reference, Engine& candidate, std::span<const int32_t> tokens);

}  // namespace tern
