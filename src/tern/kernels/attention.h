#pragma once
// Scaled dot-product attention of one query token over a KV cache (decode).
// The caller names the positions the query sees, [first_pos, last_pos]
// (causality and sliding windows are the caller's choice of range). The
// cache may be a ring: position p lives in slot p % capacity, so a
// sliding-window layer keeps only its window. Grouped-query attention: query
// head h reads kv head h / (n_heads / n_kv_heads).
//
// Per head: s[p] = dot(q_h, k[p]) * scale (16-lane order of the active path)
// for p in increasing position order; with sinks, one more logit sinks[h]
// joins the row (gpt_oss: it takes probability mass but has no value); the
// softmax (kernels/ops.h) runs over the row; out_h = sum over p in increasing
// position order of softmax[p] * v[p] (each step an axpy). Heads run in
// parallel; each head is computed by one thread with this fixed order, so the
// result depends neither on the thread count nor on where the ring wraps.
// Query heads that share a kv head are computed together so K and V are read
// once per group, which changes no result.
#include <cstdint>

namespace tern {

class ThreadPool;

// One layer's keys and values: slot s at keys + s * stride.
struct KVRing {
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t capacity = 0;  // slots; position p is in slot p % capacity
  int64_t stride = 0;    // floats between slots (n_kv_heads * head_dim)
};

struct AttentionHeads {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0;               // applied to q.k before the softmax
  const float* sinks = nullptr;  // [n_heads] logits, or null
  // Floats of each value row that are summed (0: head_dim); out is then
  // [n_heads, value_dim]. Multi-head latent attention's values are the first
  // kv_lora_rank floats of its keys.
  int64_t value_dim = 0;
};

// Floats of scratch attention_decode needs for n_pos positions (one score
// row per head, plus the sink).
int64_t attention_decode_scratch_floats(int64_t n_heads, int64_t n_pos);

// q: [n_heads, head_dim]; out: [n_heads, head_dim]. Attends to positions
// first_pos..last_pos (at most kv.capacity of them, all present in the ring).
// pool may be null.
void attention_decode(const float* q, const KVRing& kv, int64_t first_pos, int64_t last_pos,
                      const AttentionHeads& heads, float* out, float* scratch, ThreadPool* pool);

// The whole cache [0, n_pos) laid out flat: k_cache, v_cache [n_pos, n_kv_heads, head_dim].
void attention_decode(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                      int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                      float* out, float* scratch, ThreadPool* pool);

}  // namespace tern
