#include "tern/experts/policy_sim.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "tern/core/error.h"

namespace tern {

namespace {

constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();  // Belady: no next demand

// A doubly linked list over dense ids with a sentinel: front = newest.
class IdList {
 public:
  explicit IdList(uint32_t n) : prev_(n + 1, n), next_(n + 1, n), end_(n) {}
  void push_front(uint32_t id) {
    next_[id] = next_[end_];
    prev_[id] = end_;
    prev_[next_[end_]] = id;
    next_[end_] = id;
  }
  void unlink(uint32_t id) {
    next_[prev_[id]] = next_[id];
    prev_[next_[id]] = prev_[id];
  }
  // The oldest id for which skip() is false, unlinked.
  template <typename Skip>
  uint32_t take_oldest(Skip skip) {
    for (uint32_t id = prev_[end_]; id != end_; id = prev_[id])
      if (!skip(id)) {
        unlink(id);
        return id;
      }
    return end_;
  }
  uint32_t end() const { return end_; }

 private:
  std::vector<uint32_t> prev_, next_;
  uint32_t end_;
};

// The simulation common to every policy. P provides begin_batch(b),
// demand(id, access, hit), end_batch() and victim(), which picks and forgets
// a resident expert that is not pinned.
struct Cache {
  const ReplayAccesses& a;
  std::vector<uint8_t> resident;
  std::vector<int64_t> batch_of;  // the batch that last demanded each id: its experts are pinned
  int64_t batch = -1;
  std::vector<std::pair<uint32_t, uint64_t>> order;  // (id, access) of a batch, in serving order

  explicit Cache(const ReplayAccesses& accesses)
      : a(accesses), resident(accesses.distinct, 0), batch_of(accesses.distinct, -1) {}
  bool pinned(uint32_t id) const { return batch_of[id] == batch; }

  template <typename P>
  ReplayResult run(P& policy, uint64_t capacity) {
    ReplayResult r;
    uint64_t size = 0;
    for (batch = 0; batch < a.batches(); ++batch) {
      const uint64_t first = a.starts[static_cast<size_t>(batch)],
                     last = a.starts[static_cast<size_t>(batch) + 1];
      // The engine's order: resident experts first, then missing ones, each by id.
      order.clear();
      for (uint64_t i = first; i < last; ++i) {
        batch_of[a.ids[i]] = batch;
        order.push_back({a.ids[i], i});
      }
      // (prepare_replay sorted each batch by expert id)
      std::stable_partition(order.begin(), order.end(), [&](const auto& x) { return resident[x.first] != 0; });
      policy.begin_batch(batch);
      for (const auto& [id, i] : order) {
        const bool hit = resident[id] != 0;
        if (hit) {
          ++r.hits;
        } else {
          ++r.misses;
          if (size == capacity) {
            resident[policy.victim()] = 0;
            --size;
          }
          resident[id] = 1;
          ++size;
        }
        policy.demand(id, i, hit);
      }
      policy.end_batch();
    }
    return r;
  }
};

// lru, fifo and lookahead-oracle: a recency list.
class ListPolicy {
 public:
  ListPolicy(const Cache& cache, ReplayPolicy kind)
      : c_(cache), kind_(kind), list_(cache.a.distinct), protected_by_(cache.a.distinct, -1) {}

  void begin_batch(int64_t b) {
    if (kind_ != ReplayPolicy::LookaheadOracle || (b + 1) % c_.a.layers == 0) return;
    for (uint64_t i = c_.a.starts[static_cast<size_t>(b) + 1];
         i < c_.a.starts[static_cast<size_t>(b) + 2]; ++i)
      protected_by_[c_.a.ids[i]] = b;
  }
  void end_batch() {}
  void demand(uint32_t id, uint64_t, bool hit) {
    if (hit && kind_ == ReplayPolicy::Fifo) return;
    if (hit) list_.unlink(id);
    list_.push_front(id);
  }
  uint32_t victim() {
    if (kind_ == ReplayPolicy::LookaheadOracle) {
      const uint32_t v = list_.take_oldest(
          [&](uint32_t id) { return c_.pinned(id) || protected_by_[id] == c_.batch; });
      if (v != list_.end()) return v;
    }
    return list_.take_oldest([&](uint32_t id) { return c_.pinned(id); });
  }

 private:
  const Cache& c_;
  ReplayPolicy kind_;
  IdList list_;
  std::vector<int64_t> protected_by_;  // the batch whose next layer demands the id
};

// A binary heap whose top is the next victim, with stale entries left in
// place and skipped: an entry is stale once its expert was demanded again
// (a newer entry exists) or evicted. Compacted when more than half of it is
// stale, so it stays O(resident experts) however long the trace.
template <typename Item, typename Order>  // std heap order: the top is the greatest
class LazyHeap {
 public:
  template <typename Current>
  void push(const Item& x, uint64_t live, Current current) {
    heap_.push_back(x);
    std::push_heap(heap_.begin(), heap_.end(), Order{});
    if (heap_.size() > 2 * live + 1024) {
      std::erase_if(heap_, [&](const Item& y) { return !current(y); });
      std::make_heap(heap_.begin(), heap_.end(), Order{});
    }
  }
  // Removes and returns the top current entry's id that is not pinned.
  template <typename Current, typename Pinned>
  uint32_t pop(Current current, Pinned pinned) {
    aside_.clear();
    for (;;) {
      if (heap_.empty()) fail("policy replay: no expert to evict (internal)");
      std::pop_heap(heap_.begin(), heap_.end(), Order{});
      const Item top = heap_.back();
      heap_.pop_back();
      if (!current(top)) continue;
      if (pinned(top.id)) {  // a batch-mate: kept, and still current
        aside_.push_back(top);
        continue;
      }
      for (const Item& x : aside_) {
        heap_.push_back(x);
        std::push_heap(heap_.begin(), heap_.end(), Order{});
      }
      return top.id;
    }
  }

 private:
  std::vector<Item> heap_, aside_;
};

// lfu: least demanded, then least recently demanded; counts outlive
// eviction, as in ExpertCache. One heap entry per resident expert, pushed
// when it is inserted and left alone on hits: an expert's key (count, last
// demand) only grows, so an entry's key is a lower bound of its expert's,
// and a top entry found out of date is pushed again with the current key.
// The first up-to-date top is the true minimum.
class LfuPolicy {
  struct Item {
    uint64_t count, last;
    uint32_t id;
  };
  struct Order {  // the top is the least (count, last)
    bool operator()(const Item& x, const Item& y) const {
      return x.count != y.count ? x.count > y.count : x.last > y.last;
    }
  };

 public:
  explicit LfuPolicy(const Cache& cache)
      : c_(cache), count_(cache.a.distinct, 0), last_(cache.a.distinct, 0) {}
  uint64_t tick_ = 0;
  void begin_batch(int64_t) {}
  void demand(uint32_t id, uint64_t, bool hit) {
    ++count_[id];
    last_[id] = ++tick_;  // recency in serving order, as the engine's cache ticks
    if (!hit) inserted_.push_back(id);
  }
  // A batch's new experts join the heap once the batch is served: pinned
  // until then, and (rarely demanded) they would sit on top of it.
  void end_batch() {
    for (uint32_t id : inserted_) push({count_[id], last_[id], id});
    inserted_.clear();
  }
  uint32_t victim() {
    aside_.clear();
    for (;;) {
      if (heap_.empty()) fail("policy replay: no expert to evict (internal)");
      std::pop_heap(heap_.begin(), heap_.end(), Order{});
      Item top = heap_.back();
      heap_.pop_back();
      if (top.last != last_[top.id]) {  // demanded since it was pushed
        top.count = count_[top.id];
        top.last = last_[top.id];
        push(top);
      } else if (c_.pinned(top.id)) {
        aside_.push_back(top);
      } else {
        for (const Item& x : aside_) push(x);
        return top.id;
      }
    }
  }

 private:
  void push(const Item& x) {
    heap_.push_back(x);
    std::push_heap(heap_.begin(), heap_.end(), Order{});
  }

  const Cache& c_;
  std::vector<uint64_t> count_, last_;
  std::vector<Item> heap_,
      aside_;  // heap_: one entry per resident expert not inserted by this batch
  std::vector<uint32_t> inserted_;
};

// belady: the expert demanded again farthest ahead (or never). The next
// demand of every access comes from one backward pass.
class BeladyPolicy {
  struct Item {
    uint32_t next, id;
  };
  struct Order {  // the top is the farthest next demand (ties: the higher id)
    bool operator()(const Item& x, const Item& y) const {
      return x.next != y.next ? x.next < y.next : x.id < y.id;
    }
  };
  // Each demand's next-demand index is unique (and an expert never demanded
  // again is never reinserted), so an entry is current while it matches.
  auto current() const {
    return [this](const Item& x) { return c_.resident[x.id] && next_[x.id] == x.next; };
  }

 public:
  explicit BeladyPolicy(const Cache& cache)
      : c_(cache), next_use_(cache.a.accesses()), next_(cache.a.distinct, kNever) {
    std::vector<uint32_t> seen(cache.a.distinct, kNever);
    for (uint64_t i = cache.a.accesses(); i-- > 0;) {
      const uint32_t id = cache.a.ids[i];
      next_use_[i] = seen[id];
      seen[id] = static_cast<uint32_t>(i);
    }
  }
  void begin_batch(int64_t) {}
  void demand(uint32_t id, uint64_t access, bool hit) {
    if (!hit) ++live_;
    next_[id] = next_use_[access];
    demanded_.push_back(id);
  }
  // The batch's experts get their new entries once it is served: pinned
  // until then, and often the farthest, they would sit on top of the heap.
  void end_batch() {
    for (uint32_t id : demanded_) heap_.push({next_[id], id}, live_, current());
    demanded_.clear();
  }
  uint32_t victim() {
    --live_;
    return heap_.pop(current(), [&](uint32_t id) { return c_.pinned(id); });
  }

 private:
  const Cache& c_;
  std::vector<uint32_t>
      next_use_;                // per access: the index of the same expert's next demand, or kNever
  std::vector<uint32_t> next_;  // per expert: its next demand after the last one served
  LazyHeap<Item, Order> heap_;
  std::vector<uint32_t> demanded_;  // by this batch
  uint64_t live_ = 0;
};

}  // namespace

std::string_view replay_policy_name(ReplayPolicy policy) {
  switch (policy) {
    case ReplayPolicy::Lru:
      return "lru";
    case ReplayPolicy::Lfu:
      return "lfu";
    case ReplayPolicy::Fifo:
      return "fifo";
    case ReplayPolicy::LookaheadOracle:
      return "lookahead-oracle";
    case ReplayPolicy::Belady:
      return "belady";
  }
  return "?";
}

const std::vector<ReplayPolicy>& all_replay_policies() {
  static const std::vector<ReplayPolicy> all = {ReplayPolicy::Lru, ReplayPolicy::Lfu,
                                                ReplayPolicy::Fifo, ReplayPolicy::LookaheadOracle,
                                                ReplayPolicy::Belady};
  return all;
}

ReplayPolicy parse_replay_policy(std::string_view name) {
  for (ReplayPolicy p : all_replay_policies())
    if (name == replay_policy_name(p)) return p;
  fail("policy '{}' is not one of: lru, lfu, fifo, lookahead-oracle, belady", name);
}

ReplayAccesses prepare_replay(const RoutingTrace& trace) {
  if (trace.accesses() >= kNever)
    fail("trace has {} expert demands; replay takes fewer than 2^32", trace.accesses());
  ReplayAccesses a;
  a.layers = trace.layers;
  a.starts = trace.starts;
  a.ids.resize(trace.experts.size());
  int32_t max_expert = 0;
  for (int32_t e : trace.experts) max_expert = std::max(max_expert, e);
  // Dense numbering in order of first demand: a table when (layer, expert)
  // pairs are few (real models: <= 256 experts x <= 128 layers), else a map.
  const uint64_t pairs =
      static_cast<uint64_t>(trace.layers) * (static_cast<uint64_t>(max_expert) + 1);
  std::vector<uint32_t> table(pairs <= (uint64_t{1} << 24) ? pairs : 0, kNever);
  std::unordered_map<uint64_t, uint32_t> map;
  auto dense = [&](int64_t layer, int32_t expert) {
    const uint64_t key = static_cast<uint64_t>(layer) * (static_cast<uint64_t>(max_expert) + 1) +
                         static_cast<uint64_t>(expert);
    uint32_t& slot = table.empty() ? map.try_emplace(key, kNever).first->second : table[key];
    if (slot == kNever) slot = a.distinct++;
    return slot;
  };
  std::vector<int32_t> batch;
  for (int64_t b = 0; b < a.batches(); ++b) {
    const uint64_t first = a.starts[static_cast<size_t>(b)],
                   last = a.starts[static_cast<size_t>(b) + 1];
    batch.assign(trace.experts.begin() + static_cast<std::ptrdiff_t>(first),
                 trace.experts.begin() + static_cast<std::ptrdiff_t>(last));
    std::sort(batch.begin(), batch.end());  // the order the MoE block requests them
    for (size_t j = 0; j < batch.size(); ++j) a.ids[first + j] = dense(b % a.layers, batch[j]);
    if (batch.size() > a.widest) {
      a.widest = batch.size();
      a.widest_token = b / a.layers;
      a.widest_layer = b % a.layers;
    }
  }
  return a;
}

ReplayResult replay(const ReplayAccesses& accesses, ReplayPolicy policy,
                    const ReplayOptions& options) {
  const int64_t capacity = options.capacity;
  if (capacity < 1 || static_cast<uint64_t>(capacity) < accesses.widest)
    fail(
        "capacity {} cannot hold the {} experts token {} demands in MoE layer {} (line {}): a "
        "token's experts of "
        "a layer are resident together, so the capacity must be at least {}",
        capacity, accesses.widest, accesses.widest_token, accesses.widest_layer,
        accesses.widest_token + 1, std::max<uint64_t>(1, accesses.widest));
  Cache cache(accesses);
  const auto cap = static_cast<uint64_t>(capacity);
  switch (policy) {
    case ReplayPolicy::Lfu: {
      LfuPolicy p(cache);
      return cache.run(p, cap);
    }
    case ReplayPolicy::Belady: {
      BeladyPolicy p(cache);
      return cache.run(p, cap);
    }
    default: {
      ListPolicy p(cache, policy);
      return cache.run(p, cap);
    }
  }
}

}  // namespace tern
