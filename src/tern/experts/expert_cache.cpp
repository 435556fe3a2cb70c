#include "tern/experts/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "tern/core/error.h"
#include "tern/core/timeline.h"
#include "tern/core/units.h"

namespace tern {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string_view cache_policy_name(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::Lru: return "lru";
    case CachePolicy::Lfu: return "lfu";
    case CachePolicy::Lookahead: return "lookahead";
  }
  return "?";
}

CachePolicy parse_cache_policy(std::string_view name) {
  for (CachePolicy p : {CachePolicy::Lru, CachePolicy::Lfu, CachePolicy::Lookahead})
    if (name == cache_policy_name(p)) return p;
  fail("--policy '{}' is not one of: lru, lfu, lookahead", name);
}

ExpertCache::Handle::Handle(Handle&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), entry_(std::exchange(o.entry_, nullptr)) {}

ExpertCache::Handle& ExpertCache::Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    release();
    cache_ = std::exchange(o.cache_, nullptr);
    entry_ = std::exchange(o.entry_, nullptr);
  }
  return *this;
}

ExpertCache::Handle::~Handle() { release(); }

const uint8_t* ExpertCache::Handle::data() const {
  return entry_ ? static_cast<const Entry*>(entry_)->buffer.data() : nullptr;
}

void ExpertCache::Handle::release() {
  if (cache_) cache_->unpin(static_cast<Entry*>(entry_));
  cache_ = nullptr;
  entry_ = nullptr;
}

ExpertCache::ExpertCache(ExpertStore& store, uint64_t budget_bytes, CachePolicy policy)
    : store_(store), budget_(budget_bytes), policy_(policy) {
  accuracy_.fill(1.0);
  if (const char* b = std::getenv("TERN_PREFETCH_BAR")) fixed_bar_ = std::atof(b);
}

int ExpertCache::prediction_rank(int distance, int64_t position, bool batch) {
  constexpr int kPositions = 16, kDistances = kRankClasses / 2 / kPositions;
  const int d = std::clamp(distance, 0, kDistances - 1);
  return (batch ? kRankClasses / 2 : 0) + d * kPositions + static_cast<int>(std::clamp<int64_t>(position, 0, kPositions - 1));
}

ExpertCache::~ExpertCache() {
  std::unique_lock lock(mu_);
  landed_.wait(lock, [&] { return loading_ == 0; });
}

uint64_t ExpertCache::minimum_budget(const Manifest& manifest, int64_t experts_at_once) {
  uint64_t widest = 0;
  for (const auto& l : manifest.expert_layers) widest = std::max(widest, l.stride);
  return widest * static_cast<uint64_t>(std::max<int64_t>(1, experts_at_once));
}

void ExpertCache::unpin(Entry* e) {
  std::lock_guard lock(mu_);
  if (e->pins > 0) --e->pins;
  // A failed read is forgotten once nobody holds it, so a later request retries.
  if (e->pins == 0 && e->state == State::Failed) erase(entries_.find(e->key));
}

void ExpertCache::touch(Entry& e) {
  e.last_use = ++tick_;
  lru_.splice(lru_.begin(), lru_, e.lru);
}

// Prefetches and preloads (Spare::PredictedOrPrefetched) also spare
// prefetched records not yet demanded: they sit at the LRU list's cold end,
// where the next prediction would otherwise evict the one before it (a
// layer's predictions pushing each other out). A demand miss under the
// lookahead policy first spares only what the lookahead predicts now
// (Spare::Predicted): a prefetch of a layer already passed that was not used
// is a misprediction, and keeping it would evict records that recency says
// are likelier to be used.
bool ExpertCache::evictable(const Entry& e, Spare spare) const {
  if (e.pins > 0 || e.hot || e.state == State::Loading) return false;
  switch (spare) {
    case Spare::Nothing: return true;
    case Spare::Predicted: return !protected_.count(e.key);
    case Spare::PredictedOrPrefetched: return !(e.prefetched || protected_.count(e.key));
  }
  return true;
}

void ExpertCache::erase(std::unordered_map<uint64_t, Entry>::iterator it) {
  Entry& e = it->second;
  used_ -= e.bytes;
  if (e.prefetched) {
    stats_.prefetch_wasted_bytes += e.bytes;
    resolve_prefetch(e.prefetch_rank, false);
  }
  lru_.erase(e.lru);
  entries_.erase(it);
}

bool ExpertCache::make_room(uint64_t bytes, bool spare_protected, RecordBuffer& reuse) {
  while (used_ + bytes > budget_) {
    std::unordered_map<uint64_t, Entry>::iterator victim = entries_.end();
    if (policy_ == CachePolicy::Lfu) {
      // Least demanded, then least recently used (a scan: a few thousand
      // entries at most, against milliseconds of reading per miss).
      uint64_t best_count = ~0ull, best_tick = ~0ull;
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (!evictable(it->second, spare_protected ? Spare::PredictedOrPrefetched : Spare::Nothing)) continue;
        auto d = demand_.find(it->first);
        const uint64_t count = d == demand_.end() ? 0 : d->second;
        if (count < best_count || (count == best_count && it->second.last_use < best_tick)) {
          best_count = count;
          best_tick = it->second.last_use;
          victim = it;
        }
      }
    } else {
      const Spare last = spare_protected ? Spare::PredictedOrPrefetched : Spare::Nothing;
      const Spare first = policy_ == CachePolicy::Lookahead && !spare_protected ? Spare::Predicted : last;
      for (auto pass : {first, last}) {  // lookahead: unpredicted first, then any
        for (auto it = lru_.rbegin(); it != lru_.rend() && victim == entries_.end(); ++it) {
          auto e = entries_.find(*it);
          if (evictable(e->second, pass)) victim = e;
        }
        if (victim != entries_.end()) break;
      }
    }
    if (victim == entries_.end()) return false;
    if (!reuse.data() && victim->second.buffer.size() == bytes) reuse = std::move(victim->second.buffer);
    erase(victim);
    ++stats_.evictions;
  }
  return true;
}

ExpertCache::Entry& ExpertCache::insert(const ExpertLayer& layer, int64_t expert, RecordBuffer buffer) {
  const uint64_t k = key(layer.layer, expert);
  if (!buffer.data()) buffer = arena_.take(layer.stride);
  used_ += buffer.size();
  lru_.push_front(k);
  Entry& e = entries_[k];
  e.cache = this;
  e.key = k;
  e.buffer = std::move(buffer);
  e.bytes = e.buffer.size();
  e.state = State::Loading;
  e.lru = lru_.begin();
  e.last_use = ++tick_;
  if (loading_++ == 0) busy_since_ = now_seconds();
  return e;
}

void ExpertCache::resolve_prefetch(int rank, bool used) {
  double& a = accuracy_[static_cast<size_t>(rank)];
  a = 0.97 * a + (used ? 0.03 : 0.0);
}

double ExpertCache::busy_total(double now) const { return busy_total_ + (loading_ > 0 ? now - busy_since_ : 0.0); }

void ExpertCache::sample_utilization(double now) {
  if (utilization_time_ < 0) {
    utilization_time_ = now;
    utilization_busy_ = busy_total(now);
    return;
  }
  const double dt = now - utilization_time_;
  if (dt < 0.01) return;
  const double busy = busy_total(now);
  const double a = 1.0 - std::exp(-dt / kUtilizationSeconds);
  utilization_ += a * (std::clamp((busy - utilization_busy_) / dt, 0.0, 1.0) - utilization_);
  utilization_time_ = now;
  utilization_busy_ = busy;
}

double ExpertCache::bar_locked(uint64_t bytes) const {
  if (bytes < kLatencyBoundRecord) return kMinPrefetchAccuracy;
  if (fixed_bar_ >= 0) return fixed_bar_;
  return std::max(kMinPrefetchAccuracy, utilization_);
}

double ExpertCache::prefetch_bar(uint64_t bytes) const {
  std::lock_guard lock(mu_);
  return bar_locked(bytes);
}

double ExpertCache::disk_utilization() const {
  std::lock_guard lock(mu_);
  return utilization_;
}

double ExpertCache::prefetch_accuracy(int rank) const {
  std::lock_guard lock(mu_);
  return accuracy_.at(static_cast<size_t>(rank));
}

void ExpertCache::start_read(const ExpertLayer& layer, int64_t expert, Entry& e, bool urgent) {
  try {
    timeline::mark(timeline::kQueued, layer.layer, expert * 2 + (urgent ? 1 : 0));
    e.buffer.prefault();  // fresh pages: faulted in by the CPU, not during the DMA (record_arena.h)
    store_.read_async(layer, expert, e.buffer.data(), &ExpertCache::on_read, &e, urgent);
  } catch (const Error& err) {
    const std::string message = err.what();
    on_read(&e, &message);
  }
}

void ExpertCache::on_read(void* context, const std::string* error) {
  auto* e = static_cast<Entry*>(context);
  ExpertCache& c = *e->cache;
  std::lock_guard lock(c.mu_);
  timeline::mark(timeline::kLanded, static_cast<int64_t>(e->key >> 32), static_cast<int64_t>(e->key & 0xffffffffu));
  if (error) {
    e->state = State::Failed;
    e->error = *error;
  } else {
    e->state = State::Ready;
    c.stats_.bytes_read += e->bytes;
  }
  if (--c.loading_ == 0) {
    const double busy = now_seconds() - c.busy_since_;
    c.stats_.io_busy_seconds += busy;
    c.busy_total_ += busy;
  }
  const bool orphan = e->pins == 0 && e->state == State::Failed;  // a failed prefetch nobody waits for
  if (orphan) c.erase(c.entries_.find(e->key));
  c.landed_.notify_all();
}

ExpertCache::Handle ExpertCache::request(const ExpertLayer& layer, int64_t expert) {
  const uint64_t k = key(layer.layer, expert);
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = entries_.find(k);
    if (it != entries_.end() && it->second.state == State::Failed && it->second.pins == 0) {
      erase(it);  // retry a read that failed earlier
      it = entries_.end();
    }
    if (it != entries_.end()) {
      Entry& e = it->second;
      ++stats_.lookups;
      ++stats_.hits;
      ++demand_[k];
      if (e.prefetched) {
        e.prefetched = false;
        ++stats_.prefetch_hits;
        stats_.prefetch_useful_bytes += e.bytes;
        resolve_prefetch(e.prefetch_rank, true);
      }
      touch(e);
      ++e.pins;
      // A prefetch or preload still queued behind others is demanded now:
      // it moves ahead of them (the layer waits for it).
      if (e.state == State::Loading && !e.urgent) {
        e.urgent = true;
        uint8_t* dst = e.buffer.data();
        lock.unlock();
        store_.promote(dst);
      }
      return Handle(this, &e);
    }
    RecordBuffer reuse;
    if (make_room(layer.stride, false, reuse)) {
      ++stats_.lookups;
      ++stats_.misses;
      ++demand_[k];
      Entry& e = insert(layer, expert, std::move(reuse));
      e.pins = 1;
      e.urgent = true;
      lock.unlock();
      start_read(layer, expert, e, true);
      return Handle(this, &e);
    }
    // No room: wait for prefetches in flight to land (they become evictable);
    // if nothing is loading, the budget is all pinned by the caller.
    bool unpinned_loading = false;
    for (const auto& [key, e] : entries_) unpinned_loading = unpinned_loading || (e.state == State::Loading && e.pins == 0);
    if (!unpinned_loading) return Handle();
    landed_.wait(lock);
  }
}

bool ExpertCache::ready(const Handle& h) const {
  std::lock_guard lock(mu_);
  return static_cast<const Entry*>(h.entry_)->state != State::Loading;
}

const uint8_t* ExpertCache::wait(Handle& h) {
  if (!h) fail("ExpertCache::wait on an empty handle");
  auto* e = static_cast<Entry*>(h.entry_);
  std::unique_lock lock(mu_);
  if (e->state == State::Loading) {
    const double t0 = now_seconds();
    timeline::mark(timeline::kWait, static_cast<int64_t>(e->key >> 32), static_cast<int64_t>(e->key & 0xffffffffu));
    landed_.wait(lock, [&] { return e->state != State::Loading; });
    timeline::mark(timeline::kWaitEnd);
    stats_.stall_seconds += now_seconds() - t0;
  }
  if (e->state == State::Failed) fail("{}", e->error);
  return e->buffer.data();
}

ExpertCache::Handle ExpertCache::acquire(const ExpertLayer& layer, int64_t expert) {
  Handle h = request(layer, expert);
  if (!h)
    fail("expert cache full: {} of {} budget is held by experts in use; --ram must be at least {}",
         format_bytes(used_bytes()), format_bytes(budget_), format_bytes(used_bytes() + layer.stride));
  wait(h);
  return h;
}

bool ExpertCache::prefetch(const ExpertLayer& layer, int64_t expert, int rank) {
  if (expert < 0 || expert >= layer.num_experts) return false;
  if (rank < 0 || rank >= kRankClasses) fail("prefetch rank {} is outside 0..{}", rank, kRankClasses - 1);
  const uint64_t k = key(layer.layer, expert);
  std::unique_lock lock(mu_);
  sample_utilization(now_seconds());
  if (entries_.count(k)) return false;
  const auto r = static_cast<size_t>(rank);
  if (accuracy_[r] < bar_locked(layer.stride) && ++prefetch_calls_[r] % kProbeEvery != 0) {
    ++stats_.prefetches_skipped;
    return false;
  }
  RecordBuffer reuse;
  if (!make_room(layer.stride, true, reuse)) return false;
  Entry& e = insert(layer, expert, std::move(reuse));
  e.prefetched = true;
  e.prefetch_rank = static_cast<int8_t>(rank);
  // It enters the LRU list at the cold end and moves to the front when
  // demanded (touch), so an unused prediction goes before records the next
  // tokens would hit (other predictions spare it: evictable). Entering at the
  // front it pushed those out: on the 30B shape decode read 109-113 MiB per
  // token against 80-94 this way, at 8.4-8.6 vs 10.0-11.6 tok/s with the disk
  // at 1 GB/s (docs/RESULTS.md).
  lru_.splice(lru_.end(), lru_, e.lru);
  ++stats_.prefetches;
  lock.unlock();
  start_read(layer, expert, e, false);
  return true;
}

void ExpertCache::warm(const ExpertLayer& layer, int64_t expert) {
  const uint64_t k = key(layer.layer, expert);
  std::unique_lock lock(mu_);
  RecordBuffer reuse;
  if (entries_.count(k) || !make_room(layer.stride, true, reuse)) return;
  Entry& e = insert(layer, expert, std::move(reuse));
  lock.unlock();
  start_read(layer, expert, e, false);
}

void ExpertCache::set_protected(const std::vector<uint64_t>& keys) {
  std::lock_guard lock(mu_);
  protected_.clear();
  protected_.insert(keys.begin(), keys.end());
}

void ExpertCache::add_protected(const std::vector<uint64_t>& keys) {
  std::lock_guard lock(mu_);
  protected_.insert(keys.begin(), keys.end());
}

void ExpertCache::pin_hot(const ExpertLayer& layer, int64_t expert) {
  Handle h = acquire(layer, expert);
  std::lock_guard lock(mu_);
  auto* e = static_cast<Entry*>(h.entry_);
  if (!e->hot) hot_ += e->bytes;
  e->hot = true;
}

bool ExpertCache::contains(int64_t layer, int64_t expert) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key(layer, expert));
  return it != entries_.end() && it->second.state != State::Failed;
}

std::vector<uint64_t> ExpertCache::resident_keys() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> keys;
  keys.reserve(entries_.size());
  for (const auto& [k, e] : entries_)
    if (e.state != State::Failed) keys.push_back(k);
  return keys;
}

uint64_t ExpertCache::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

uint64_t ExpertCache::hot_bytes() const {
  std::lock_guard lock(mu_);
  return hot_;
}

size_t ExpertCache::cached_experts() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard lock(mu_);
  ExpertCacheStats s = stats_;
  if (loading_ > 0) s.io_busy_seconds += now_seconds() - busy_since_;
  return s;
}

void ExpertCache::reset_stats() {
  std::lock_guard lock(mu_);
  stats_ = {};
  if (loading_ > 0) busy_since_ = now_seconds();
}

std::unordered_map<uint64_t, uint64_t> ExpertCache::demand_counts() const {
  std::lock_guard lock(mu_);
  return demand_;
}

void ExpertCache::add_demand_counts(const std::unordered_map<uint64_t, uint64_t>& counts) {
  std::lock_guard lock(mu_);
  for (const auto& [k, n] : counts) demand_[k] += n;
}

}  // namespace tern
