#include "tern/kernels/matvec.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/dense_kernels.h"

namespace tern {
namespace {

// Rows are handed to threads in groups of 4, the decode tile height, so a
// split never leaves a thread a ragged tile in the middle of the matrix.
constexpr int64_t kRowGroup = 4;

// A chunk of work should stream at least this many weight bytes: a spinning
// worker starts a chunk ~0.3 us after the call (measured), and 64 KiB take
// ~1 us to stream from L3 on one core, so a hand-off pays for itself.
constexpr int64_t kMinChunkBytes = 64 * 1024;

void run_rows(const WeightView& w, const float* X, int64_t n_tokens, float* Y, ThreadPool* pool,
              const char* what) {
  check_weight_view(w, what);
  if (n_tokens < 0) fail("{}: negative token count {}", what, n_tokens);
  if (w.rows == 0 || n_tokens == 0) return;
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
