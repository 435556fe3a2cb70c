#pragma once
// KVCache — keys and values of every position seen so far, per layer:
// [max_positions, kv_heads * head_dim] floats each, allocated up front so a
// context overflow is a clear error, not a reallocation mid-generation.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern {

class KVCache {
 public:
  KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim);

  float* keys(int64_t layer, int64_t pos) { return &k_[index(layer, pos)]; }
  float* values(int64_t layer, int64_t pos) { return &v_[index(layer, pos)]; }
  const float* keys(int64_t layer) const { return &k_[index(layer, 0)]; }
  const float* values(int64_t layer) const { return &v_[index(layer, 0)]; }

  int64_t max_positions() const { return max_positions_; }
  int64_t kv_dim() const { return kv_dim_; }
  uint64_t bytes() const { return 2 * k_.size() * sizeof(float); }

 private:
  size_t index(int64_t layer, int64_t pos) const {
    return static_cast<size_t>((layer * max_positions_ + pos) * kv_dim_);
  }
  int64_t max_positions_, kv_dim_;
  std::vector<float> k_, v_;
};

}  // namespace tern
