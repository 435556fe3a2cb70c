#include "tern/experts/policy_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "support/expect_error.h"

namespace tern {
namespace {

using testing::expect_error;

// A trace with one MoE layer from a sequence of single experts.
RoutingTrace one_layer(const std::vector<int32_t>& sequence) {
  std::string text;
  for (int32_t e : sequence) text += fmt::format("{{\"experts\": [[{}]]}}\n", e);
  return parse_routing_trace(text);
}

uint64_t hits(const RoutingTrace& trace, ReplayPolicy policy, int64_t capacity) {
  const ReplayResult r = replay(prepare_replay(trace), policy, capacity);
  EXPECT_EQ(r.hits + r.misses, trace.accesses());
  return r.hits;
}

// 1 2 3 4 1 2 5 1 2 3 4 5 with 3 slots, by hand:
//   lru    misses all but the 1 and 2 after 5: 2 hits;
//   fifo   keeps 1 2 5 for the second 1 2, then 5 at the end: 3 hits;
//   belady evicts 3 (used last) for 4, 4 for 5, then experts never used
//          again: hits at 1 2 1 2 5, 5 hits (the textbook optimum, 7 faults).
TEST(PolicySim, BeladyBeatsLruAndFifoByKnownCounts) {
  const RoutingTrace t = one_layer({1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5});
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 3), 2u);
  EXPECT_EQ(hits(t, ReplayPolicy::Fifo, 3), 3u);
  EXPECT_EQ(hits(t, ReplayPolicy::Belady, 3), 5u);
  EXPECT_EQ(hits(t, ReplayPolicy::Lfu, 3), 2u);
  EXPECT_EQ(hits(t, ReplayPolicy::Belady, 5), 7u);  // all fit: only the 5 first uses miss
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 5), 7u);
}

// x x y y y z z w x z x with 2 slots. ExpertCache's lfu counts every demand
// since the start, evicted experts keeping theirs, and breaks ties by the
// least recent: the z miss evicts x (2 < 3), w evicts z (2 < 3), x comes back
// with 3 and evicts w (1), then z comes back with 3 and evicts y (3, used
// longer ago than x's 3), so the last x hits: 5 hits. Counts reset on
// eviction would make the last x miss (4); ties to the most recent too.
TEST(PolicySim, LfuCountsOutliveEvictionAndTiesGoToTheLeastRecent) {
  const int32_t x = 0, y = 1, z = 2, w = 3;
  const RoutingTrace t = one_layer({x, x, y, y, y, z, z, w, x, z, x});
  EXPECT_EQ(hits(t, ReplayPolicy::Lfu, 2), 5u);
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 2), 5u);
}

// The same expert id in two layers is two experts.
TEST(PolicySim, KeysAreLayerAndExpert) {
  const RoutingTrace t =
      parse_routing_trace("{\"experts\": [[0], [0]]}\n{\"experts\": [[0], [0]]}\n");
  const ReplayAccesses a = prepare_replay(t);
  EXPECT_EQ(a.distinct, 2u);
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 2), 2u);
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 1), 0u);
  EXPECT_EQ(hits(t, ReplayPolicy::Belady, 1), 0u);
}

// Batch {3, 4} then {1, 3} with 2 slots: 3 is the least recent when 1
// misses, but it is 1's batch-mate, so 4 goes and 3 hits (the engine
// requests its resident experts first for exactly this reason).
TEST(PolicySim, BatchMatesAreNeverEvicted) {
  const RoutingTrace t = parse_routing_trace("{\"experts\": [[3, 4]]}\n{\"experts\": [[1, 3]]}\n");
  for (ReplayPolicy p : all_replay_policies())
    EXPECT_EQ(hits(t, p, 2), 1u) << replay_policy_name(p);
}

TEST(PolicySim, CapacityBelowOneBatchIsAClearError) {
  const RoutingTrace t =
      parse_routing_trace("{\"experts\": [[1], [2]]}\n{\"experts\": [[1], [2, 5, 6]]}\n");
  const ReplayAccesses a = prepare_replay(t);
  expect_error([&] { replay(a, ReplayPolicy::Lru, 2); },
               {"capacity 2 cannot hold the 3 experts token 1 demands in MoE layer 1 (line 2)",
                "at least 3"});
  expect_error([&] { replay(a, ReplayPolicy::Belady, 0); }, {"capacity 0"});
  EXPECT_EQ(replay(a, ReplayPolicy::Belady, 3).misses, 4u);
}

// Layers L0, L1, 3 slots: (a, b), (a, e), (c, b). When c misses, b is the
// least recent; lru evicts it and misses it next, lookahead-oracle keeps it
// (the same token's next layer) and evicts a: 1 hit against 2.
TEST(PolicySim, LookaheadOracleKeepsTheNextLayersExperts) {
  const RoutingTrace t = parse_routing_trace(
      "{\"experts\": [[0], [1]]}\n{\"experts\": [[0], [4]]}\n{\"experts\": [[2], [1]]}\n");
  EXPECT_EQ(hits(t, ReplayPolicy::Lru, 3), 1u);
  EXPECT_EQ(hits(t, ReplayPolicy::LookaheadOracle, 3), 2u);
  EXPECT_EQ(hits(t, ReplayPolicy::Belady, 3), 2u);
}

TEST(PolicySim, PolicyNames) {
  for (ReplayPolicy p : all_replay_policies())
    EXPECT_EQ(parse_replay_policy(replay_policy_name(p)), p);
  expect_error([] { parse_replay_policy("mru"); },
               {"'mru'", "lru, lfu, fifo, lookahead-oracle, belady"});
}

// --- Against a plain reference: a vector of resident experts, scanned. ---

struct Demand {
  int64_t token, layer;
  int32_t expert;
};

std::vector<std::vector<Demand>> batches(const RoutingTrace& t) {
  std::vector<std::vector<Demand>> out;
  for (int64_t token = 0; token < t.tokens(); ++token)
    for (int64_t l = 0; l < t.layers; ++l) {
      std::vector<Demand> b;
      for (int32_t e : t.batch(token, l)) b.push_back({token, l, e});
      std::sort(b.begin(), b.end(),
                [](const Demand& x, const Demand& y) { return x.expert < y.expert; });
      out.push_back(b);
    }
  return out;
}

uint64_t reference_hits(const RoutingTrace& t, ReplayPolicy policy, size_t capacity) {
  using Key = std::pair<int64_t, int32_t>;
  const auto all = batches(t);
  std::vector<Key> flat;
  for (const auto& b : all)
    for (const Demand& d : b) flat.push_back({d.layer, d.expert});
  struct Slot {
    Key key;
    uint64_t inserted, used;
  };
  std::vector<Slot> cache;
  std::map<Key, uint64_t> count;
  uint64_t hit = 0, clock = 0, at = 0;
  for (size_t bi = 0; bi < all.size(); ++bi) {
    const auto& b = all[bi];
    auto in_batch = [&](const Key& k) {
      return std::any_of(b.begin(), b.end(), [&](const Demand& d) {
        return Key{d.layer, d.expert} == k;
      });
    };
    auto in_next_layer = [&](const Key& k) {
      if ((bi + 1) % static_cast<size_t>(t.layers) == 0) return false;
      const auto& n = all[bi + 1];
      return std::any_of(n.begin(), n.end(), [&](const Demand& d) {
        return Key{d.layer, d.expert} == k;
      });
    };
    // Served as the engine serves a batch: resident experts first, then the
    // missing ones, each group in the batch's (ascending) order.
    std::vector<Demand> served(b.begin(), b.end());
    std::stable_partition(served.begin(), served.end(), [&](const Demand& d) {
      return std::any_of(cache.begin(), cache.end(), [&](const Slot& s) { return s.key == Key{d.layer, d.expert}; });
    });
    for (const Demand& d : served) {
      const Key k{d.layer, d.expert};
      ++clock;
      ++count[k];
      auto it = std::find_if(cache.begin(), cache.end(), [&](const Slot& s) { return s.key == k; });
      if (it != cache.end()) {
        ++hit;
        it->used = clock;
      } else {
        if (cache.size() == capacity) {
          auto worse = [&](const Slot& a, const Slot& c) {  // a goes before c
            switch (policy) {
              case ReplayPolicy::Lru:
                return a.used < c.used;
              case ReplayPolicy::Fifo:
                return a.inserted < c.inserted;
              case ReplayPolicy::Lfu:
                return count[a.key] != count[c.key] ? count[a.key] < count[c.key] : a.used < c.used;
              case ReplayPolicy::LookaheadOracle:
                return in_next_layer(a.key) != in_next_layer(c.key) ? !in_next_layer(a.key)
                                                                    : a.used < c.used;
              case ReplayPolicy::Belady: {
                auto next = [&](const Key& key) {
                  for (size_t j = at + 1; j < flat.size(); ++j)
                    if (flat[j] == key) return j;
                  return flat.size();
                };
                return next(a.key) > next(c.key);
              }
            }
            return false;
          };
          auto victim = cache.end();
          for (auto s = cache.begin(); s != cache.end(); ++s)
            if (!in_batch(s->key) && (victim == cache.end() || worse(*s, *victim))) victim = s;
          cache.erase(victim);
        }
        cache.push_back({k, clock, clock});
      }
      ++at;
    }
  }
  return hit;
}

// Random traces: a skewed choice of experts, 1-3 layers, top-1 to top-3.
RoutingTrace random_trace(std::mt19937& rng, int64_t tokens, int64_t layers, int64_t top_k,
                          int32_t experts) {
  std::string text;
  for (int64_t t = 0; t < tokens; ++t) {
    text += "{\"experts\": [";
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<int32_t> chosen;
      while (static_cast<int64_t>(chosen.size()) < top_k) {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        const auto e = static_cast<int32_t>(std::pow(u, 2.0) * experts);  // low ids more often
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
      }
      text += l ? ", [" : "[";
      for (size_t j = 0; j < chosen.size(); ++j)
        text += fmt::format("{}{}", j ? ", " : "", chosen[j]);
      text += "]";
    }
    text += "]}\n";
  }
  return parse_routing_trace(text);
}

TEST(PolicySim, MatchesAPlainReferenceOnRandomTraces) {
  std::mt19937 rng(2024);
  for (int round = 0; round < 60; ++round) {
    const int64_t layers = 1 + round % 3, top_k = 1 + (round / 3) % 3;
    const RoutingTrace t = random_trace(rng, 40 + round * 5, layers, top_k, 12);
    const ReplayAccesses a = prepare_replay(t);
    for (int64_t capacity : {top_k, top_k + 1, 2 * top_k + 3, 4 * top_k + 5, int64_t{200}})
      for (ReplayPolicy p : all_replay_policies())
        ASSERT_EQ(replay(a, p, capacity).hits, reference_hits(t, p, static_cast<size_t>(capacity)))
            << replay_policy_name(p) << " round " << round << " capacity " << capacity;
  }
}

// The fewest misses any sequence of evictions can reach, by trying them all.
uint64_t optimal_misses(const std::vector<std::vector<int32_t>>& batches, size_t capacity, size_t b,
                        size_t j, std::vector<int32_t>& cache) {
  if (b == batches.size()) return 0;
  if (j == batches[b].size()) return optimal_misses(batches, capacity, b + 1, 0, cache);
  const int32_t e = batches[b][j];
  if (std::find(cache.begin(), cache.end(), e) != cache.end())
    return optimal_misses(batches, capacity, b, j + 1, cache);
  uint64_t best = ~0ull;
  if (cache.size() < capacity) {
    cache.push_back(e);
    best = 1 + optimal_misses(batches, capacity, b, j + 1, cache);
    cache.pop_back();
    return best;
  }
  for (size_t v = 0; v < cache.size(); ++v) {
    const int32_t old = cache[v];
    if (std::find(batches[b].begin(), batches[b].end(), old) != batches[b].end())
      continue;  // a batch-mate
    cache[v] = e;
    best = std::min(best, 1 + optimal_misses(batches, capacity, b, j + 1, cache));
    cache[v] = old;
  }
  return best;
}

TEST(PolicySim, BeladyIsOptimalWithBatches) {
  std::mt19937 rng(99);
  for (int round = 0; round < 150; ++round) {
    const int64_t top_k = 1 + round % 2;
    const RoutingTrace t = random_trace(rng, 6 + round % 4, 1, top_k, 6);
    std::vector<std::vector<int32_t>> b;
    for (int64_t token = 0; token < t.tokens(); ++token) {
      auto s = t.batch(token, 0);
      b.emplace_back(s.begin(), s.end());
      std::sort(b.back().begin(), b.back().end());
    }
    const ReplayAccesses a = prepare_replay(t);
    for (int64_t capacity : {top_k, top_k + 1, top_k + 2}) {
      std::vector<int32_t> cache;
      const uint64_t best = optimal_misses(b, static_cast<size_t>(capacity), 0, 0, cache);
      ASSERT_EQ(replay(a, ReplayPolicy::Belady, capacity).misses, best)
          << "round " << round << " capacity " << capacity;
      for (ReplayPolicy p : all_replay_policies()) ASSERT_GE(replay(a, p, capacity).misses, best);
    }
  }
}

// 50,000 tokens x 48 MoE layers x top-8 of 128 experts (19.2M demands):
// shows replay handles the size; its time is measured, never asserted
// (docs/TRACES.md has the numbers). Experts follow a Zipf-like popularity
// per layer that drifts every 1000 tokens, with a token reusing half of the
// previous token's experts in a layer.
TEST(PolicySim, ReplaysFiftyThousandTokensOfFortyEightLayers) {
  // Scale is what this test is about; under the sanitizers (10x slower,
  // and finding no more at 50,000 tokens than at 5,000) it replays a tenth.
#if defined(TERN_SANITIZED)
  const int64_t tokens = 5000;
#else
  const int64_t tokens = 50000;
#endif
  const int64_t layers = 48, top_k = 8;
  const int32_t experts = 128;
  RoutingTrace t;
  t.layers = layers;
  t.starts.reserve(static_cast<size_t>(tokens * layers + 1));
  t.experts.reserve(static_cast<size_t>(tokens * layers * top_k));
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> last(static_cast<size_t>(layers));
  for (int64_t token = 0; token < tokens; ++token)
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<int32_t> chosen;
      for (int32_t e : last[static_cast<size_t>(l)])
        if (chosen.size() < static_cast<size_t>(top_k / 2) && rng() % 2) chosen.push_back(e);
      while (static_cast<int64_t>(chosen.size()) < top_k) {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        const auto rank = static_cast<int32_t>(std::pow(u, 3.0) * experts);
        const int32_t e =
            (rank * 37 + static_cast<int32_t>(l) * 11 + static_cast<int32_t>(token / 1000) * 5) %
            experts;
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
      }
      t.experts.insert(t.experts.end(), chosen.begin(), chosen.end());
      t.starts.push_back(t.experts.size());
      last[static_cast<size_t>(l)] = chosen;
    }
  ASSERT_EQ(t.accesses(), static_cast<uint64_t>(tokens * layers * top_k));
  const auto t0 = std::chrono::steady_clock::now();
  const ReplayAccesses a = prepare_replay(t);
  std::map<std::string, ReplayResult> results;
  for (ReplayPolicy p : all_replay_policies())
    results[std::string(replay_policy_name(p))] = replay(a, p, 1024);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string summary = fmt::format("prepare + {} policies: {:.2f}s;", results.size(), seconds);
  for (const auto& [name, r] : results) {
    EXPECT_EQ(r.hits + r.misses, t.accesses()) << name;
    EXPECT_GE(results["belady"].hits, r.hits) << name;
    summary += fmt::format(" {} {:.4f}", name, r.hit_rate());
  }
  RecordProperty("replay", summary);
  std::printf("%s\n", summary.c_str());
}

}  // namespace
}  // namespace tern
