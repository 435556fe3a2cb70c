#include "tern/models/kv_cache.h"

namespace tern {

KVCache::KVCache(int64_t layers, int64_t max_positions, int64_t kv_dim)
    : max_positions_(max_positions),
      kv_dim_(kv_dim),
      k_(static_cast<size_t>(layers * max_positions * kv_dim)),
      v_(static_cast<size_t>(layers * max_positions * kv_dim)) {}

}  // namespace tern
