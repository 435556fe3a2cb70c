#include "tern/kernels/matvec.h"

#include <algorithm>

#include "tern/core/aligned_buffer.h"
#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/dense_kernels.h"
#include "tern/kernels/quant_kernels.h"
#include "tern/quant/quantize.h"

namespace tern {
namespace {

// Rows are handed to threads in groups of 4, the decode tile height, so a
// split never leaves a thread a ragged tile in the middle of the matrix.
constexpr int64_t kRowGroup = 4;

// A chunk of work should stream at least this many weight bytes: a spinning
// worker starts a chunk ~0.3 us after the call (measured), and 64 KiB take
// ~1 us to stream from L3 on one core, so a hand-off pays for itself.
constexpr int64_t kMinChunkBytes = 64 * 1024;

// Quantizing a token's activations is handed to another thread only in
// chunks of at least this many elements (~2 us of work).
constexpr int64_t kMinQuantizeChunk = 16 * 1024;

// The quantized activations of the calling thread's current call. Grows to
// the largest call seen and is then reused: no allocation per call.
uint8_t* activation_scratch(int64_t bytes) {
  thread_local AlignedBuffer buffer;
  if (static_cast<int64_t>(buffer.size()) < bytes) buffer = AlignedBuffer(static_cast<size_t>(bytes), 64);
  return buffer.data();
}

// Block-quantized weights: quantize every token's activations once, then
// each row (in tiles of 8 rows) meets them all; see quant_kernels.h.
void run_quantized_rows(const WeightView& w, const float* X, int64_t n_tokens, float* Y,
                        ThreadPool* pool) {
  const detail::QuantKernels& kernels = detail::active_quant_kernels();
  const int64_t bytes = std::max<int64_t>(64, detail::quant_acts_bytes(w.format, w.cols, n_tokens));
  const detail::QuantActs acts = detail::quant_acts_layout(w.format, w.cols, n_tokens, activation_scratch(bytes));
  auto quantize = [&](int64_t t_begin, int64_t t_end) {
    for (int64_t t = t_begin; t < t_end; ++t) kernels.quantize(w.format, X + t * w.cols, w.cols, acts, t);
  };
  const bool parallel = pool != nullptr && pool->size() > 1;
  if (parallel && n_tokens > 1)
    pool->parallel_for(n_tokens, std::max<int64_t>(1, kMinQuantizeChunk / std::max<int64_t>(1, w.cols)), quantize);
  else
    quantize(0, n_tokens);

  const detail::RowsRef rows{static_cast<const uint8_t*>(w.data), w.format, weight_row_bytes(w), w.cols};
  constexpr int64_t kGroup = detail::kQuantRowGroup;
  const int64_t groups = (w.rows + kGroup - 1) / kGroup;
  auto body = [&](int64_t g_begin, int64_t g_end) {
    kernels.gemm_rows(rows, g_begin * kGroup, std::min(w.rows, g_end * kGroup), acts, n_tokens, Y, w.rows);
  };
  if (!parallel) {
    body(0, groups);
    return;
  }
  const int64_t group_bytes = std::max<int64_t>(1, rows.row_stride * kGroup * n_tokens);
  int64_t min_groups = std::max<int64_t>(1, kMinChunkBytes / group_bytes);
  // A lone token streams the matrix once: one contiguous range per thread
  // (chunks == threads), so each thread's prefetch stream starts once per
  // call instead of at each of 4 chunks per thread. Alternating runs, 2
  // threads, 768x2048 and 2048x768: +15-20% weight GB/s; big matrices equal.
  if (n_tokens == 1) min_groups = std::max<int64_t>(min_groups, groups / pool->size());
  pool->parallel_for(groups, min_groups, body);
}

void run_rows(const WeightView& w, const float* X, int64_t n_tokens, float* Y, ThreadPool* pool,
              const char* what) {
  check_weight_view(w, what);
  if (n_tokens < 0) fail("{}: negative token count {}", what, n_tokens);
  if (w.rows == 0 || n_tokens == 0) return;
  if (is_quantized(w.format)) return run_quantized_rows(w, X, n_tokens, Y, pool);
  const detail::DenseKernels& kernels = detail::active_dense_kernels();
  const detail::RowsRef rows{static_cast<const uint8_t*>(w.data), w.format, weight_row_bytes(w),
                             w.cols};
  const int64_t groups = (w.rows + kRowGroup - 1) / kRowGroup;
  auto body = [&](int64_t g_begin, int64_t g_end) {
    kernels.gemm_rows(rows, g_begin * kRowGroup, std::min(w.rows, g_end * kRowGroup), X, w.cols,
                      n_tokens, Y, w.rows);
  };
  if (pool == nullptr || pool->size() == 1) {
    body(0, groups);
    return;
  }
  // Work of one row group, counting each token's pass over it like a byte.
  const int64_t group_bytes = std::max<int64_t>(1, rows.row_stride * kRowGroup * n_tokens);
  const int64_t min_groups = std::max<int64_t>(1, kMinChunkBytes / group_bytes);
  pool->parallel_for(groups, min_groups, body);
}

}  // namespace

void matvec(const WeightView& w, const float* x, float* y, ThreadPool* pool) {
  run_rows(w, x, 1, y, pool, "matvec");
}

void matmul(const WeightView& w, const float* X, int64_t n_tokens, float* Y, ThreadPool* pool) {
  run_rows(w, X, n_tokens, Y, pool, "matmul");
}

}  // namespace tern
