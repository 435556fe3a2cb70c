#include "tern/models/kv_cache.h"

#include <algorithm>

#include "tern/core/error.h"

namespace tern {

KVCache::KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim)
    : KVCache(max_positions, std::vector<int64_t>(static_cast<size_t>(layers), max_positions),
              std::vector<int64_t>(static_cast<size_t>(layers), kv_dim)) {}

KVCache::KVCache(int64_t max_positions, std::vector<int64_t> capacities, std::vector<int64_t> kv_dims,
                 bool values_alias_keys, std::vector<int64_t> state_floats)
    : max_positions_(max_positions),
      capacity_(std::move(capacities)),
      kv_dim_(std::move(kv_dims)),
      values_alias_keys_(values_alias_keys),
      state_floats_(std::move(state_floats)) {
  if (capacity_.size() != kv_dim_.size()) fail("KVCache: {} capacities for {} layers", capacity_.size(), kv_dim_.size());
  if (state_floats_.empty()) state_floats_.assign(capacity_.size(), 0);
  if (state_floats_.size() != capacity_.size())
    fail("KVCache: {} state sizes for {} layers", state_floats_.size(), capacity_.size());
  size_t total = 0, states = 0;
  for (size_t l = 0; l < capacity_.size(); ++l) {
    offset_.push_back(total);
    state_offset_.push_back(states);
    if (state_floats_[l] < 0) fail("KVCache: layer {} state of {} floats", l, state_floats_[l]);
    if (state_floats_[l] > 0) {
      if (capacity_[l] != 0 || kv_dim_[l] != 0)
        fail("KVCache: layer {} is a state layer and has a capacity {} / width {}", l, capacity_[l], kv_dim_[l]);
      states += static_cast<size_t>(state_floats_[l]);
      continue;
    }
    if (capacity_[l] < 1 || capacity_[l] > max_positions_ || kv_dim_[l] < 1)
      fail("KVCache: layer {} capacity {} / width {} invalid for a context of {}", l, capacity_[l], kv_dim_[l],
           max_positions_);
    total += static_cast<size_t>(capacity_[l] * kv_dim_[l]);
  }
  k_.resize(total);
  if (!values_alias_keys_) v_.resize(total);
  s_.resize(states);
}

bool KVCache::has_rings() const {
  if (!s_.empty()) return true;
  for (int64_t l = 0; l < layers(); ++l)
    if (is_ring(l)) return true;
  return false;
}

int64_t KVCache::total_ring_floats() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers(); ++l)
    if (is_ring(l)) n += capacity(l) * kv_dim(l);
  return n;
}

void KVCache::clear_states() { std::fill(s_.begin(), s_.end(), 0.0f); }

KVCache::RingSnapshot KVCache::snapshot_rings(int64_t position) const {
  RingSnapshot s;
  s.position = position;
  const auto ring = static_cast<size_t>(total_ring_floats());  // reserved: no doubling on the way (400 MiB for Gemma 4)
  s.k.reserve(ring);
  if (!values_alias_keys_) s.v.reserve(ring);
  for (int64_t layer = 0; layer < layers(); ++layer) {
    if (!is_ring(layer)) continue;
    const auto l = static_cast<size_t>(layer);
    const auto n = static_cast<size_t>(capacity_[l] * kv_dim_[l]);
    s.k.insert(s.k.end(), k_.begin() + static_cast<ptrdiff_t>(offset_[l]), k_.begin() + static_cast<ptrdiff_t>(offset_[l] + n));
    if (!values_alias_keys_)
      s.v.insert(s.v.end(), v_.begin() + static_cast<ptrdiff_t>(offset_[l]), v_.begin() + static_cast<ptrdiff_t>(offset_[l] + n));
  }
  s.state = s_;
  return s;
}

void KVCache::restore_rings(const RingSnapshot& s) {
  if (s.state.size() != s_.size()) fail("KVCache: a ring snapshot of another layout");
  size_t at = 0;
  for (int64_t layer = 0; layer < layers(); ++layer) {
    if (!is_ring(layer)) continue;
    const auto l = static_cast<size_t>(layer);
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
  std::copy(s.state.begin(), s.state.end(), s_.begin());
}

KVRing KVCache::ring(int64_t layer) const {
  const auto l = static_cast<size_t>(layer);
  const float* keys = &k_[offset_[l]];
  return KVRing{keys, values_alias_keys_ ? keys : &v_[offset_[l]], capacity_[l], kv_dim_[l]};
}

}  // namespace tern
