#pragma once
// Scaled dot-product attention of one query token over a KV cache (decode).
// Causality is implicit: the cache holds exactly the positions the query may
// see (0 .. n_pos-1, the current token included). Grouped-query attention:
// query head h reads kv head h / (n_heads / n_kv_heads).
//
// Per head: s[p] = dot(q_h, k[p]) * scale (16-lane order of the active path),
// softmax over p (kernels/ops.h), out_h = sum over p in increasing order of
// softmax[p] * v[p] (each step an axpy). Heads run in parallel; each head is
// computed by one thread with this fixed order, so the result does not depend
// on the thread count. Query heads that share a kv head are computed together
// so K and V are read once per group, which changes no result.
// Attention sinks, sliding windows and QK-norm are added beside this entry.
#include <cstdint>

namespace tern {

class ThreadPool;

// Floats of scratch attention_decode needs (one score row per head).
int64_t attention_decode_scratch_floats(int64_t n_heads, int64_t n_pos);

// q: [n_heads, head_dim]; k_cache, v_cache: [n_pos, n_kv_heads, head_dim];
// out: [n_heads, head_dim]; scratch: attention_decode_scratch_floats floats.
// n_heads must be a multiple of n_kv_heads and n_pos >= 1. pool may be null.
void attention_decode(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                      int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                      float* out, float* scratch, ThreadPool* pool);

}  // namespace tern
