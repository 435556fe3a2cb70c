#include "tern/kernels/attention.h"

#include <algorithm>
#include <cstring>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/dense_kernels.h"
#include "tern/kernels/ops.h"

namespace tern {

int64_t attention_decode_scratch_floats(int64_t n_heads, int64_t n_pos) { return n_heads * n_pos; }

void attention_decode(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                      int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                      float* out, float* scratch, ThreadPool* pool) {
  if (n_pos < 1) fail("attention_decode: empty KV cache (n_pos {})", n_pos);
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0)
    fail("attention_decode: {} query heads is not a multiple of {} kv heads", n_heads, n_kv_heads);
  if (head_dim < 1) fail("attention_decode: head_dim {} must be positive", head_dim);

  const detail::DenseKernels& kernels = detail::active_dense_kernels();
  const int64_t group = n_heads / n_kv_heads;
  const int64_t pos_stride = n_kv_heads * head_dim;  // floats between positions

  // Heads [h_begin, h_end) in runs that share one kv head: the run's scores
  // are one small matmul (its query heads as "tokens" over the cached keys)
  // and its outputs one weighted sum of value rows, so K and V are read from
  // cache once per run instead of once per head. Per element the arithmetic
  // is the same as head by head, so the split into runs changes nothing.
  auto heads = [&](int64_t h_begin, int64_t h_end) {
    for (int64_t h0 = h_begin; h0 < h_end;) {
      const int64_t kv = h0 / group;
      const int64_t h1 = std::min(h_end, (kv + 1) * group);
      const int64_t run = h1 - h0;
      float* scores = scratch + h0 * n_pos;  // [run, n_pos]
      const detail::RowsRef keys{reinterpret_cast<const uint8_t*>(k_cache + kv * head_dim),
                                 TensorFormat::F32, pos_stride * 4, head_dim};
      kernels.gemm_rows(keys, 0, n_pos, q + h0 * head_dim, head_dim, run, scores, n_pos);
      for (int64_t h = 0; h < run; ++h) {
        float* s = scores + h * n_pos;
        for (int64_t p = 0; p < n_pos; ++p) s[p] *= scale;
        softmax(s, n_pos);
      }
      float* o = out + h0 * head_dim;
      std::memset(o, 0, static_cast<size_t>(run * head_dim) * sizeof(float));
      kernels.weighted_rows(scores, n_pos, run, v_cache + kv * head_dim, pos_stride, n_pos, head_dim, o);
      h0 = h1;
    }
  };
  // One head is n_pos * head_dim * 8 bytes of K and V; below ~16 KiB of
  // cache per chunk a hand-off costs more than it saves.
  int64_t head_bytes = std::max<int64_t>(1, n_pos * head_dim * 8);
  int64_t min_heads = std::max<int64_t>(1, (16 * 1024) / head_bytes);
  if (pool == nullptr) heads(0, n_heads);
  else pool->parallel_for(n_heads, min_heads, heads);
}

}  // namespace tern
