#pragma once
// ExpertCache — routed experts held in memory under a byte budget (--ram).
// acquire() returns a pinned handle (a hit, or a read through the
// ExpertStore on a miss); the least recently used unpinned expert is evicted
// to make room. An expert in use is never evicted. Placement never changes
// results: a record's bytes are the same whether cached or re-read.
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

#include "tern/core/aligned_buffer.h"
#include "tern/experts/expert_store.h"

namespace tern {

struct ExpertCacheStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t bytes_read = 0;
  double read_seconds = 0;
};

class ExpertCache {
 public:
  ExpertCache(const ExpertStore& store, uint64_t budget_bytes);

  // The smallest budget that holds `experts_at_once` experts of the widest
  // layer (a token's top-k must be resident together).
  static uint64_t minimum_budget(const Manifest& manifest, int64_t experts_at_once);

  // A pinned expert record; unpins on destruction.
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& o) noexcept;
    Handle& operator=(Handle&& o) noexcept;
    ~Handle();
    const uint8_t* data() const { return data_; }
    explicit operator bool() const { return data_ != nullptr; }

   private:
    friend class ExpertCache;
    Handle(ExpertCache* cache, uint64_t key, const uint8_t* data) : cache_(cache), key_(key), data_(data) {}
    void release();
    ExpertCache* cache_ = nullptr;
    uint64_t key_ = 0;
    const uint8_t* data_ = nullptr;
  };

  Handle acquire(const ExpertLayer& layer, int64_t expert);
  bool contains(int64_t layer, int64_t expert) const;

  uint64_t budget() const { return budget_; }
  uint64_t used_bytes() const;
  size_t cached_experts() const;
  ExpertCacheStats stats() const;
  void reset_stats();

 private:
  struct Slot {
    AlignedBuffer buffer;
    int pins = 0;
    std::list<uint64_t>::iterator lru;
  };
  static uint64_t key(int64_t layer, int64_t expert) {
    return (static_cast<uint64_t>(layer) << 32) | static_cast<uint32_t>(expert);
  }
  void unpin(uint64_t key);
  // Frees unpinned experts, least recently used first, until `bytes` fit.
  // Returns a freed buffer of exactly `bytes` if one came free (reused).
  AlignedBuffer make_room(uint64_t bytes);

  const ExpertStore& store_;
  const uint64_t budget_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Slot> slots_;
  std::list<uint64_t> lru_;  // front = most recently used
  uint64_t used_ = 0;
  ExpertCacheStats stats_;
};

}  // namespace tern
