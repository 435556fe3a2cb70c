#pragma once
// ExpertCache — routed experts held in memory under one byte budget (--ram)
// across all layers, filled asynchronously from the ExpertStore.
//
// request() pins an expert and, on a miss, starts its read and returns at
// once; wait() blocks until the record has landed (ready() asks without
// blocking). So the MoE block submits every read a layer needs, computes the
// experts already resident, and takes each missing one as it lands.
// prefetch() starts reads the lookahead predicts, without pinning and
// without evicting anything in use or predicted. A pinned or loading expert
// is never evicted; --pin-hot experts never are.
//
// Eviction policies (--policy):
//   lru        least recently demanded first (the default until measured otherwise);
//   lfu        least often demanded first, least recent among equals;
//   lookahead  lru, but experts the lookahead predicted for the current and
//              coming layers (set_protected) are kept while others can go.
// Placement never changes results: a record's bytes are the same whether
// cached, prefetched or re-read.
#include <array>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tern/experts/record_arena.h"
#include "tern/experts/expert_store.h"

namespace tern {

enum class CachePolicy { Lru, Lfu, Lookahead };
std::string_view cache_policy_name(CachePolicy policy);
// "lru", "lfu" or "lookahead"; throws tern::Error naming the choices otherwise.
CachePolicy parse_cache_policy(std::string_view name);

struct ExpertCacheStats {
  uint64_t lookups = 0;         // demanded experts (token-layer-expert, deduplicated per batch)
  uint64_t hits = 0;            // demanded and already resident or loading
  uint64_t prefetch_hits = 0;   // ... of which a prefetch had brought or was bringing
  uint64_t misses = 0;          // demanded and read then
  uint64_t evictions = 0;
  uint64_t bytes_read = 0;      // demand and prefetch reads
  uint64_t prefetches = 0;      // prefetch reads started
  uint64_t prefetches_skipped = 0;  // predictions not read (recent accuracy too low)
  uint64_t prefetch_useful_bytes = 0;  // prefetched records later demanded
  uint64_t prefetch_wasted_bytes = 0;  // prefetched records evicted without use
  double io_busy_seconds = 0;   // wall time with at least one read in flight
  double stall_seconds = 0;     // time callers spent blocked in wait()
};

class ExpertCache {
 public:
  ExpertCache(ExpertStore& store, uint64_t budget_bytes, CachePolicy policy = CachePolicy::Lru);
  ~ExpertCache();  // waits for reads in flight
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // The smallest budget that holds `experts_at_once` experts of the widest
  // layer (a token's top-k must be resident together).
  static uint64_t minimum_budget(const Manifest& manifest, int64_t experts_at_once);
  static uint64_t key(int64_t layer, int64_t expert) {
    return (static_cast<uint64_t>(layer) << 32) | static_cast<uint32_t>(expert);
  }

  // A pinned expert; unpins on destruction. data() is valid once ready.
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& o) noexcept;
    Handle& operator=(Handle&& o) noexcept;
    ~Handle();
    const uint8_t* data() const;
    explicit operator bool() const { return entry_ != nullptr; }

   private:
    friend class ExpertCache;
    Handle(ExpertCache* cache, void* entry) : cache_(cache), entry_(entry) {}
    void release();
    ExpertCache* cache_ = nullptr;
    void* entry_ = nullptr;
  };

  // Pins the expert, starting its read on a miss. Returns an empty handle
  // when every byte of the budget is pinned (release some and retry).
  Handle request(const ExpertLayer& layer, int64_t expert);
  bool ready(const Handle& handle) const;
  // Blocks until the record is in memory; throws tern::Error (naming the
  // expert) if its read failed. A later request reads it again.
  const uint8_t* wait(Handle& handle);
  // request + wait; fails clearly when the budget cannot hold the expert.
  Handle acquire(const ExpertLayer& layer, int64_t expert);

  // Starts reading a predicted expert if it is absent and fits without
  // evicting an expert in use, loading or protected. Never blocks. Its read
  // queues behind demand reads. `rank` classes the prediction (prediction_rank:
  // how far ahead, how high the router put it); while the share of recent
  // prefetches of that class that were used is below prefetch_bar() (the
  // others were evicted unused: the router's lower picks for a far layer, or
  // routing that is not predictable, as with random weights), only one of its
  // prefetches in kProbeEvery is made, so wrong predictions cost little and a
  // predictable stretch turns them back on.
  bool prefetch(const ExpertLayer& layer, int64_t expert, int rank = 0);
  // The accuracy class `rank` needs to be prefetched, for records of `bytes`:
  // kMinPrefetchAccuracy for records smaller than kLatencyBoundRecord (their
  // reads cost the disk's latency, not its bandwidth: a wasted one delays
  // little), otherwise the larger of that and disk_utilization(). A wasted
  // prefetch of a bandwidth-bound record delays the demand reads behind it
  // when the disk is busy (share u of the time) and a used one saves a stall
  // only when it is not, so at utilization u a class pays off above u.
  double prefetch_bar(uint64_t bytes) const;
  // Share of recent wall time with at least one read in flight (EWMA with a
  // time constant of kUtilizationSeconds, sampled at prefetch calls).
  double disk_utilization() const;
  static constexpr uint64_t kLatencyBoundRecord = 256 << 10;
  static constexpr double kUtilizationSeconds = 0.5;
  // The class of a prediction `distance` MoE layers ahead (0: the next one)
  // at position `position` of the router's ranking (0: its first choice),
  // made for a batch of several tokens (a prefill chunk, where an expert is
  // used if any token demands it) or for one.
  static int prediction_rank(int distance, int64_t position, bool batch = false);
  static constexpr int kRankClasses = 128;
  // Starts reading an expert to have it resident (--preload); not a prediction.
  void warm(const ExpertLayer& layer, int64_t expert);
  static constexpr double kMinPrefetchAccuracy = 0.5;
  static constexpr int kProbeEvery = 8;
  double prefetch_accuracy(int rank = 0) const;
  // The lookahead policy keeps these (keys of key()) until the next call.
  void set_protected(const std::vector<uint64_t>& keys);
  void add_protected(const std::vector<uint64_t>& keys);
  // Reads the expert now and keeps it for the cache's lifetime (--pin-hot).
  void pin_hot(const ExpertLayer& layer, int64_t expert);

  bool contains(int64_t layer, int64_t expert) const;
  // Keys (key()) of every expert resident or loading now.
  std::vector<uint64_t> resident_keys() const;
  CachePolicy policy() const { return policy_; }
  uint64_t budget() const { return budget_; }
  uint64_t used_bytes() const;
  uint64_t hot_bytes() const;
  size_t cached_experts() const;
  ExpertCacheStats stats() const;
  void reset_stats();
  // How often each expert was demanded since the cache was made, by key().
  std::unordered_map<uint64_t, uint64_t> demand_counts() const;
  void add_demand_counts(const std::unordered_map<uint64_t, uint64_t>& counts);  // seeds LFU

 private:
  enum class State { Loading, Ready, Failed };
  struct Entry {
    ExpertCache* cache = nullptr;
    uint64_t key = 0;
    RecordBuffer buffer;
    uint64_t bytes = 0;  // buffer.size(), kept when the buffer moves to a new entry
    State state = State::Loading;
    std::string error;
    int pins = 0;
    bool hot = false;         // --pin-hot: never evicted
    bool prefetched = false;  // brought by a prefetch, not yet demanded
    int8_t prefetch_rank = 0;  // its prediction's class (prediction_rank)
    bool urgent = false;      // its read was queued as a demand (or promoted to one)
    uint64_t last_use = 0;
    std::list<uint64_t>::iterator lru;
  };
  static void on_read(void* context, const std::string* error);
  void unpin(Entry* e);
  void touch(Entry& e);
  // What an eviction spares besides pinned, hot and loading records.
  enum class Spare { Nothing, Predicted, PredictedOrPrefetched };
  bool evictable(const Entry& e, Spare spare) const;
  // Frees experts by policy until `bytes` more fit; false if they cannot.
  // A freed buffer of exactly `bytes` is handed back for reuse.
  bool make_room(uint64_t bytes, bool spare_protected, RecordBuffer& reuse);
  Entry& insert(const ExpertLayer& layer, int64_t expert, RecordBuffer buffer);  // Loading, under mu_
  void start_read(const ExpertLayer& layer, int64_t expert, Entry& e, bool urgent);
  void resolve_prefetch(int rank, bool used);
  double busy_total(double now) const;  // under mu_
  void sample_utilization(double now);  // under mu_
  double bar_locked(uint64_t bytes) const;
  void erase(std::unordered_map<uint64_t, Entry>::iterator it);

  ExpertStore& store_;
  const uint64_t budget_;
  const CachePolicy policy_;
  mutable std::mutex mu_;
  std::condition_variable landed_;
  RecordArena arena_;  // before entries_: their buffers return to it
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // front = most recently demanded
  std::unordered_map<uint64_t, uint64_t> demand_;
  std::unordered_set<uint64_t> protected_;
  uint64_t used_ = 0, hot_ = 0, tick_ = 0;
  int loading_ = 0;
  // Per prediction class: EWMA of its resolved prefetches that were used,
  // and how many of its prefetches were considered.
  std::array<double, kRankClasses> accuracy_;
  std::array<uint64_t, kRankClasses> prefetch_calls_{};
  double busy_since_ = 0;
  double busy_total_ = 0;  // io_busy_seconds since the cache was made (not reset)
  double utilization_ = 0, utilization_time_ = -1, utilization_busy_ = 0;
  // TERN_PREFETCH_BAR=x fixes the bar of bandwidth-bound records at x: the
  // A/B baseline of docs/RESULTS.md (0.5 = the rule before utilization).
  double fixed_bar_ = -1;
  ExpertCacheStats stats_;
};

}  // namespace tern
