#pragma once
// KVCache — keys and values of the positions each layer still needs,
// allocated up front so a context overflow is a clear error, not a
// reallocation mid-generation. A full-attention layer keeps every position
// of the context; a sliding-window layer keeps only its window, as a ring
// (position p in slot p % capacity). Per layer the width (kv_dim floats per
// position) may differ. A latent cache (multi-head latent attention) keeps
// one vector per position whose first floats serve as its values too:
// values() then points into the keys and nothing else is stored. A state
// layer (linear attention: Gated DeltaNet) keeps no keys or values but a
// fixed-size state per sequence that every token updates; like a ring it
// forgets, so stepping back needs a snapshot.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/kernels/attention.h"

namespace tern {

class KVCache {
 public:
  // Every layer keeps all max_positions positions of kv_dim floats.
  KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim);
  // Layer l keeps capacities[l] <= max_positions positions of kv_dims[l]
  // floats (values_alias_keys: a latent cache, keys only).
  // state_floats[l] > 0 (empty: none): layer l is a state layer of that
  // many floats (its capacity and width 0), zero at the start.
  KVCache(int64_t max_positions, std::vector<int64_t> capacities, std::vector<int64_t> kv_dims,
          bool values_alias_keys = false, std::vector<int64_t> state_floats = {});

  float* keys(int64_t layer, int64_t pos) { return &k_[index(layer, pos)]; }
  float* values(int64_t layer, int64_t pos) { return values_alias_keys_ ? keys(layer, pos) : &v_[index(layer, pos)]; }
  // Whether values() are the keys (a latent cache, nothing stored twice).
  bool values_alias_keys() const { return values_alias_keys_; }
  // The layer's ring for attention_decode.
  KVRing ring(int64_t layer) const;

  int64_t max_positions() const { return max_positions_; }
  int64_t capacity(int64_t layer) const { return capacity_[static_cast<size_t>(layer)]; }
  int64_t kv_dim(int64_t layer) const { return kv_dim_[static_cast<size_t>(layer)]; }
  int64_t layers() const { return static_cast<int64_t>(capacity_.size()); }
  uint64_t bytes() const { return (k_.size() + v_.size() + s_.size()) * sizeof(float); }

  // A state layer's state (state_floats(layer) floats); 0 floats elsewhere.
  float* state(int64_t layer) { return &s_[state_offset_[static_cast<size_t>(layer)]]; }
  int64_t state_floats(int64_t layer) const { return state_floats_[static_cast<size_t>(layer)]; }
  bool is_state_layer(int64_t layer) const { return state_floats(layer) > 0; }
  // Floats of every state layer together.
  int64_t total_state_floats() const { return static_cast<int64_t>(s_.size()); }
  // Whether a ring layer is one: keeps fewer positions than the context.
  bool is_ring(int64_t layer) const { return !is_state_layer(layer) && capacity(layer) < max_positions_; }
  // Floats of every ring layer's keys (as many values, unless they alias).
  int64_t total_ring_floats() const;
  // Zeroes every state (a new sequence).
  void clear_states();

  // Whether some layer keeps fewer positions than the context (a ring) or a
  // state: stepping back then needs a snapshot of them (below).
  bool has_rings() const;
  // The contents of every ring and state layer as they were with `position`
  // tokens fed: restoring it and keeping tokens [0, position) is exactly the
  // state the cache had then (full layers keep those positions anyway).
  struct RingSnapshot {
    int64_t position = 0;
    std::vector<float> k, v;  // ring layers in order, each capacity x kv_dim
    std::vector<float> state;  // state layers in order
  };
  RingSnapshot snapshot_rings(int64_t position) const;
  void restore_rings(const RingSnapshot& snapshot);

 private:
  size_t index(int64_t layer, int64_t pos) const {
    const auto l = static_cast<size_t>(layer);
    return offset_[l] + static_cast<size_t>((pos % capacity_[l]) * kv_dim_[l]);
  }
  int64_t max_positions_;
  std::vector<int64_t> capacity_, kv_dim_;
  std::vector<size_t> offset_;
  bool values_alias_keys_ = false;
  std::vector<float> k_, v_;
  std::vector<int64_t> state_floats_;
  std::vector<size_t> state_offset_;
  std::vector<float> s_;
};

}  // namespace tern
