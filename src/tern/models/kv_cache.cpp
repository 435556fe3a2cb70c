#include "tern/models/kv_cache.h"

#include <algorithm>

#include "tern/core/error.h"

namespace tern {

KVCache::KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim)
    : KVCache(max_positions, std::vector<int64_t>(static_cast<size_t>(layers), max_positions),
              std::vector<int64_t>(static_cast<size_t>(layers), kv_dim)) {}

KVCache::KVCache(int64_t max_positions, std::vector<int64_t> capacities, std::vector<int64_t> kv_dims,
                 bool values_alias_keys)
    : max_positions_(max_positions),
      capacity_(std::move(capacities)),
      kv_dim_(std::move(kv_dims)),
      values_alias_keys_(values_alias_keys) {
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
  if (!values_alias_keys_) v_.resize(total);
}

bool KVCache::has_rings() const {
  for (int64_t c : capacity_)
    if (c < max_positions_) return true;
  return false;
}

KVCache::RingSnapshot KVCache::snapshot_rings(int64_t position) const {
  RingSnapshot s;
  s.position = position;
  for (size_t l = 0; l < capacity_.size(); ++l) {
    if (capacity_[l] == max_positions_) continue;
    const auto n = static_cast<size_t>(capacity_[l] * kv_dim_[l]);
    s.k.insert(s.k.end(), k_.begin() + static_cast<ptrdiff_t>(offset_[l]), k_.begin() + static_cast<ptrdiff_t>(offset_[l] + n));
    if (!values_alias_keys_)
      s.v.insert(s.v.end(), v_.begin() + static_cast<ptrdiff_t>(offset_[l]), v_.begin() + static_cast<ptrdiff_t>(offset_[l] + n));
  }
  return s;
}

void KVCache::restore_rings(const RingSnapshot& s) {
  size_t at = 0;
  for (size_t l = 0; l < capacity_.size(); ++l) {
    if (capacity_[l] == max_positions_) continue;
    const auto n = static_cast<size_t>(capacity_[l] * kv_dim_[l]);
    if (at + n > s.k.size()) fail("KVCache: a ring snapshot of another layout");
    std::copy_n(s.k.begin() + static_cast<ptrdiff_t>(at), n, k_.begin() + static_cast<ptrdiff_t>(offset_[l]));
    if (!values_alias_keys_) {
      if (at + n > s.v.size()) fail("KVCache: a ring snapshot of another layout");
      std::copy_n(s.v.begin() + static_cast<ptrdiff_t>(at), n, v_.begin() + static_cast<ptrdiff_t>(offset_[l]));
    }
    at += n;
  }
  if (at != s.k.size()) fail("KVCache: a ring snapshot of another layout");
}

KVRing KVCache::ring(int64_t layer) const {
  const auto l = static_cast<size_t>(layer);
  const float* keys = &k_[offset_[l]];
  return KVRing{keys, values_alias_keys_ ? keys : &v_[offset_[l]], capacity_[l], kv_dim_[l]};
}

}  // namespace tern
