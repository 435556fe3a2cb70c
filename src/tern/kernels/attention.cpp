#include "tern/kernels/attention.h"

#include <algorithm>
#include <cstring>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/dense_kernels.h"
#include "tern/kernels/ops.h"

namespace tern {

int64_t attention_decode_scratch_floats(int64_t n_heads, int64_t n_pos) { return n_heads * (n_pos + 1); }

void attention_decode(const float* q, const KVRing& kv, int64_t first_pos, int64_t last_pos,
                      const AttentionHeads& a, float* out, float* scratch, ThreadPool* pool) {
  const int64_t n_pos = last_pos - first_pos + 1;
  if (first_pos < 0 || n_pos < 1) fail("attention_decode: empty range of positions [{}, {}]", first_pos, last_pos);
  if (n_pos > kv.capacity)
    fail("attention_decode: {} positions do not fit a cache of {} slots", n_pos, kv.capacity);
  if (a.n_heads < 1 || a.n_kv_heads < 1 || a.n_heads % a.n_kv_heads != 0)
    fail("attention_decode: {} query heads is not a multiple of {} kv heads", a.n_heads, a.n_kv_heads);
  if (a.head_dim < 1) fail("attention_decode: head_dim {} must be positive", a.head_dim);

  const detail::DenseKernels& kernels = detail::active_dense_kernels();
  const int64_t head_dim = a.head_dim;
  const int64_t value_dim = a.value_dim > 0 ? a.value_dim : head_dim;
  if (value_dim > head_dim) fail("attention_decode: value_dim {} exceeds head_dim {}", value_dim, head_dim);
  const int64_t group = a.n_heads / a.n_kv_heads;
  const int64_t row = n_pos + 1;  // scores of one head, then its sink
  // The positions as at most two runs of consecutive slots, in position order.
  struct Run {
    int64_t slot, count, offset;  // first slot, slots, index in the score row
  };
  const int64_t first_slot = first_pos % kv.capacity;
  const int64_t head_run = std::min(n_pos, kv.capacity - first_slot);
  const Run runs[2] = {{first_slot, head_run, 0}, {0, n_pos - head_run, head_run}};

  // Heads [h_begin, h_end) in groups that share one kv head: the group's
  // scores are one small matmul (its query heads as "tokens" over the cached
  // keys) and its outputs one weighted sum of value rows, so K and V are read
  // once per group. Per element the arithmetic is the same as head by head.
  auto heads = [&](int64_t h_begin, int64_t h_end) {
    for (int64_t h0 = h_begin; h0 < h_end;) {
      const int64_t kvh = h0 / group;
      const int64_t h1 = std::min(h_end, (kvh + 1) * group);
      const int64_t n = h1 - h0;
      float* scores = scratch + h0 * row;  // [n, row]
      for (const Run& r : runs) {
        if (r.count == 0) continue;
        const detail::RowsRef keys{
            reinterpret_cast<const uint8_t*>(kv.keys + r.slot * kv.stride + kvh * head_dim), TensorFormat::F32,
            kv.stride * 4, head_dim};
        kernels.gemm_rows(keys, 0, r.count, q + h0 * head_dim, head_dim, n, scores + r.offset, row);
      }
      for (int64_t h = 0; h < n; ++h) {
        float* s = scores + h * row;
        for (int64_t p = 0; p < n_pos; ++p) s[p] *= a.scale;
        if (a.sinks) {
          s[n_pos] = a.sinks[h0 + h];
          softmax(s, n_pos + 1);
        } else {
          softmax(s, n_pos);
        }
      }
      float* o = out + h0 * value_dim;
      std::memset(o, 0, static_cast<size_t>(n * value_dim) * sizeof(float));
      for (const Run& r : runs)
        if (r.count > 0)
          kernels.weighted_rows(scores + r.offset, row, n, kv.values + r.slot * kv.stride + kvh * head_dim,
                                kv.stride, r.count, value_dim, o);
      h0 = h1;
    }
  };
  // One head is n_pos * head_dim * 8 bytes of K and V; below ~16 KiB of
  // cache per chunk a hand-off costs more than it saves.
  const int64_t head_bytes = std::max<int64_t>(1, n_pos * head_dim * 8);
  const int64_t min_heads = std::max<int64_t>(1, (16 * 1024) / head_bytes);
  if (pool == nullptr) heads(0, a.n_heads);
  else pool->parallel_for(a.n_heads, min_heads, heads);
}

void attention_decode(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                      int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                      float* out, float* scratch, ThreadPool* pool) {
  if (n_pos < 1) fail("attention_decode: empty KV cache (n_pos {})", n_pos);
  const KVRing kv{k_cache, v_cache, n_pos, n_kv_heads * head_dim};
  attention_decode(q, kv, 0, n_pos - 1, AttentionHeads{n_heads, n_kv_heads, head_dim, scale, nullptr}, out, scratch,
                   pool);
}

}  // namespace tern
