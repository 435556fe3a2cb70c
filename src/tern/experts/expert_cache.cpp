#include "tern/experts/expert_cache.h"

#include <algorithm>
#include <chrono>

#include "tern/core/error.h"
#include "tern/core/units.h"

namespace tern {

ExpertCache::Handle::Handle(Handle&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), key_(o.key_), data_(std::exchange(o.data_, nullptr)) {}

ExpertCache::Handle& ExpertCache::Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    release();
    cache_ = std::exchange(o.cache_, nullptr);
    key_ = o.key_;
    data_ = std::exchange(o.data_, nullptr);
  }
  return *this;
}

ExpertCache::Handle::~Handle() { release(); }

void ExpertCache::Handle::release() {
  if (cache_) cache_->unpin(key_);
  cache_ = nullptr;
  data_ = nullptr;
}

ExpertCache::ExpertCache(const ExpertStore& store, uint64_t budget_bytes) : store_(store), budget_(budget_bytes) {}

uint64_t ExpertCache::minimum_budget(const Manifest& manifest, int64_t experts_at_once) {
  uint64_t widest = 0;
  for (const auto& l : manifest.expert_layers) widest = std::max(widest, l.stride);
  return widest * static_cast<uint64_t>(std::max<int64_t>(1, experts_at_once));
}

void ExpertCache::unpin(uint64_t k) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(k);
  if (it != slots_.end() && it->second.pins > 0) --it->second.pins;
}

AlignedBuffer ExpertCache::make_room(uint64_t bytes) {
  AlignedBuffer reuse;
  auto it = lru_.end();
  while (used_ + bytes > budget_ && it != lru_.begin()) {
    --it;
    Slot& slot = slots_.at(*it);
    if (slot.pins > 0) continue;
    used_ -= slot.buffer.size();
    if (!reuse.data() && slot.buffer.size() == bytes) reuse = std::move(slot.buffer);
    slots_.erase(*it);
    it = lru_.erase(it);
    ++stats_.evictions;
  }
  if (used_ + bytes > budget_)
    fail("expert cache full: {} of {} budget is held by experts in use; --ram must be at least {}",
         format_bytes(used_), format_bytes(budget_), format_bytes(used_ + bytes));
  return reuse;
}

ExpertCache::Handle ExpertCache::acquire(const ExpertLayer& layer, int64_t expert) {
  const uint64_t k = key(layer.layer, expert);
  std::lock_guard lock(mu_);
  ++stats_.lookups;
  if (auto it = slots_.find(k); it != slots_.end()) {
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    ++it->second.pins;
    return Handle(this, k, it->second.buffer.data());
  }
  ++stats_.misses;
  AlignedBuffer buffer = make_room(layer.stride);
  if (!buffer.data()) buffer = AlignedBuffer(layer.stride);
  auto t0 = std::chrono::steady_clock::now();
  store_.read(layer, expert, buffer.data());  // throws: the buffer is simply freed
  stats_.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.bytes_read += layer.stride;
  used_ += buffer.size();
  lru_.push_front(k);
  Slot& slot = slots_[k];
  slot.buffer = std::move(buffer);
  slot.pins = 1;
  slot.lru = lru_.begin();
  return Handle(this, k, slot.buffer.data());
}

bool ExpertCache::contains(int64_t layer, int64_t expert) const {
  std::lock_guard lock(mu_);
  return slots_.count(key(layer, expert)) != 0;
}

uint64_t ExpertCache::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

size_t ExpertCache::cached_experts() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ExpertCache::reset_stats() {
  std::lock_guard lock(mu_);
  stats_ = {};
}

}  // namespace tern
