#pragma once
// Replays a routing trace through a simulated expert cache, to compare
// eviction policies with each other and with Belady's optimum
// (`tern trace replay`). Pure functions: no I/O, no expert bytes.
//
// The simulated cache holds `capacity` experts across all layers, keyed by
// (MoE layer, expert). It is fed token by token, layer by layer; a token's
// experts in one layer are one batch: they must be resident together, so
// none of them is evicted while the batch is served (capacity below the
// widest batch is an error). Within a batch experts are demanded in
// ascending id, the order the engine's MoE block requests them. Every
// demand is a hit or a miss; a miss inserts the expert, evicting one when
// the cache is full. Nothing is prefetched.
//
// Policies (the victim on a miss with a full cache; batch-mates never):
//   lru      least recently demanded (ExpertCache's lru);
//   lfu      least often demanded since the start of the trace, evicted
//            experts keeping their counts, least recent among equals
//            (ExpertCache's lfu);
//   fifo     resident longest;
//   lookahead-oracle  lru, but the experts the same token demands in the
//            next MoE layer go last: ExpertCache's lookahead policy with a
//            perfect one-layer predictor and no prefetch, an upper bound
//            on what its protection alone can gain;
//   belady   the expert whose next demand is farthest in the future (never
//            again: farthest of all): the most hits any policy can get.
//
// The engine's prefill differs: it reads each expert once per chunk of
// prompt tokens, not once per token, so prompt hit counts are not comparable.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tern/experts/routing_trace.h"

namespace tern {

enum class ReplayPolicy { Lru, Lfu, Fifo, LookaheadOracle, Belady };
std::string_view replay_policy_name(ReplayPolicy policy);
// Throws tern::Error naming the choices for an unknown name.
ReplayPolicy parse_replay_policy(std::string_view name);
const std::vector<ReplayPolicy>& all_replay_policies();

// A trace prepared for replay, shared by every policy: batches sorted by
// expert id and (layer, expert) renumbered densely, so the simulation runs
// on arrays.
struct ReplayAccesses {
  int64_t layers = 0;
  std::vector<uint64_t> starts;                // [batches + 1], as RoutingTrace::starts
  std::vector<uint32_t> ids;                   // dense (layer, expert) per demand
  uint32_t distinct = 0;                       // distinct (layer, expert) demanded
  uint64_t widest = 0;                         // the most experts in one batch
  int64_t widest_token = 0, widest_layer = 0;  // where it is (the first one)

  uint64_t accesses() const { return ids.size(); }
  int64_t batches() const { return static_cast<int64_t>(starts.size()) - 1; }
};

ReplayAccesses prepare_replay(const RoutingTrace& trace);

struct ReplayResult {
  uint64_t hits = 0, misses = 0;
  double hit_rate() const {
    return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
  }
};

struct ReplayOptions {
  int64_t capacity = 0;  // experts, across all layers
};
// A batch is served as the engine's MoE block serves it: its experts are
// pinned together, the resident ones are demanded first, then the missing
// ones, each group in ascending id. So with --prefetch 0 and
// --prefill-chunk 1 the engine's cache hits and misses equal this replay's.

// Throws tern::Error if capacity < accesses.widest (names the token and
// layer that need more).
ReplayResult replay(const ReplayAccesses& accesses, ReplayPolicy policy,
                    const ReplayOptions& options);
inline ReplayResult replay(const ReplayAccesses& accesses, ReplayPolicy policy, int64_t capacity) {
  return replay(accesses, policy, ReplayOptions{capacity});
}

}  // namespace tern
