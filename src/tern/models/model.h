#pragma once
// Model — one architecture's forward pass over resident trunk weights and
// experts served by an ExpertCache. Created by load_model() from the
// architecture named in the container; one file per architecture composes
// the shared blocks (attention_block, moe_block).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tern/experts/expert_cache.h"
#include "tern/format/model_config.h"
#include "tern/format/tern_model.h"
#include "tern/models/kv_cache.h"
#include "tern/models/moe_block.h"

namespace tern {

class ThreadPool;

// Optional per-forward record of internals (for compare, trace, tests).
struct ForwardTrace {
  bool hidden_states = true;               // record `hidden` (routing is always recorded)
  std::vector<std::vector<float>> hidden;  // per layer: residual stream after the layer, [n, hidden]
  std::vector<Routing> routing;            // per layer (empty for dense layers)
};

// One sequence's part of a batched forward: its new tokens, the position of
// the first, its KV cache, and where its logits go ([vocab] of its last token,
// or [tokens, vocab] if all_positions).
struct SequenceBatch {
  std::span<const int32_t> tokens;
  int64_t start = 0;
  KVCache* kv = nullptr;
  float* logits = nullptr;
  bool all_positions = false;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual uint64_t resident_bytes() const = 0;  // trunk weights held in memory

  // Runs tokens at positions start..start+n-1, appending to kv. Writes
  // logits [vocab] of the last token, or [n, vocab] if all_positions.
  void forward(std::span<const int32_t> tokens, int64_t start, KVCache& kv, float* logits, bool all_positions,
               ForwardTrace* trace = nullptr);
  // Several sequences in one batch (the server decodes its requests
  // together, so each expert read serves every request routed to it). Every
  // token's result is bit-identical to running its sequence alone: no
  // kernel's arithmetic depends on what else is in the batch.
  virtual void forward_batch(std::span<const SequenceBatch> sequences, ForwardTrace* trace = nullptr) = 0;

  // A KV cache sized for this model.
  KVCache make_kv_cache(int64_t max_positions) const;
  const MoeCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 protected:
  MoeCounters counters_;
};

struct ModelOptions {
  bool verify_trunk = true;
  // Lookahead prefetch (models/moe_block.h): MoE layers predicted ahead
  // (0 = off) and experts beyond top-k per token and layer.
  int prefetch_depth = 0;
  int64_t prefetch_margin = 0;
};

// Bytes of the KV cache make_kv_cache(max_positions) allocates for this config.
uint64_t kv_cache_bytes(const ModelConfig& config, int64_t max_positions);

std::unique_ptr<Model> load_model(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                  const ModelOptions& options = {});

}  // namespace tern
