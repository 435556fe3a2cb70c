#include "tern/models/kv_cache.h"

#include "tern/core/error.h"

namespace tern {

KVCache::KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim)
    : KVCache(max_positions, std::vector<int64_t>(static_cast<size_t>(layers), max_positions),
              std::vector<int64_t>(static_cast<size_t>(layers), kv_dim)) {}

KVCache::KVCache(int64_t max_positions, std::vector<int64_t> capacities, std::vector<int64_t> kv_dims)
    : max_positions_(max_positions), capacity_(std::move(capacities)), kv_dim_(std::move(kv_dims)) {
  if (capacity_.size() != kv_dim_.size()) fail("KVCache: {} capacities for {} layers", capacity_.size(), kv_dim_.size());
  size_t total = 0;
  for (size_t l = 0; l < capacity_.size(); ++l) {
    if (capacity_[l] < 1 || capacity_[l] > max_positions_ || kv_dim_[l] < 1)
      fail("KVCache: layer {} capacity {} / width {} invalid for a context of {}", l, capacity_[l], kv_dim_[l],
           max_positions_);
    offset_.push_back(total);
    total += static_cast<size_t>(capacity_[l] * kv_dim_[l]);
  }
  k_.resize(total);
  v_.resize(total);
}

KVRing KVCache::ring(int64_t layer) const {
  const auto l = static_cast<size_t>(layer);
  return KVRing{&k_[offset_[l]], &v_[offset_[l]], capacity_[l], kv_dim_[l]};
}

}  // namespace tern
