// The kernels' hot path does not allocate: after a first call has sized the
// per-thread scratch, matvec / matmul over every weight format, on every
// kernel path this CPU runs, with and without a thread pool, make no heap
// allocation at all.
//
// This is its own executable (tern_alloc_tests) because it replaces the
// global operator new/delete to count allocations; in tern_tests that would
// take new/delete out of AddressSanitizer's mismatch checks for every test.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/matvec.h"
#include "tern/quant/quantize.h"

namespace {
std::atomic<long> g_allocations{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  n = n == 0 ? 1 : n;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n)
                                                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace tern {
namespace {

WeightView encode(TensorFormat format, int64_t rows, int64_t cols, std::vector<uint8_t>& bytes) {
  std::vector<float> x = testing::random_floats(rows * cols, 7);
  const int64_t row = row_bytes(format, cols);
  bytes.assign(static_cast<size_t>(rows * row), 0);
  for (int64_t r = 0; r < rows; ++r) quantize_row(format, x.data() + r * cols, bytes.data() + r * row, cols);
  return WeightView{bytes.data(), format, rows, cols};
}

TEST(HotPathAllocations, MatvecAndMatmulAllocateNothingAfterTheFirstCall) {
  const TensorFormat formats[] = {TensorFormat::F32,  TensorFormat::F16,  TensorFormat::BF16,
                                  TensorFormat::Q8_0, TensorFormat::Q4_0, TensorFormat::Q4_K,
                                  TensorFormat::Q6_K, TensorFormat::MXFP4};
  constexpr int64_t kRows = 96, kCols = 512, kTokens = 9;
  ThreadPool pool(2);
  std::vector<float> x = testing::random_floats(kCols * kTokens, 3);
  std::vector<float> y(static_cast<size_t>(kRows * kTokens));
  for (KernelPath path : testing::supported_paths()) {
    ScopedKernelPath scoped(path);
    for (TensorFormat format : formats) {
      std::vector<uint8_t> bytes;
      const WeightView w = encode(format, kRows, kCols, bytes);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        // The first calls size each thread's scratch for the largest shape.
        matmul(w, x.data(), kTokens, y.data(), p);
        matvec(w, x.data(), y.data(), p);
        const long before = g_allocations.load();
        for (int i = 0; i < 5; ++i) {
          matvec(w, x.data(), y.data(), p);
          for (int64_t n : {int64_t{2}, int64_t{5}, kTokens}) matmul(w, x.data(), n, y.data(), p);
        }
        EXPECT_EQ(g_allocations.load() - before, 0)
            << "path " << kernel_path_name(path) << ", format " << format_info(format).name << ", "
            << (p ? "2 threads" : "no pool");
      }
    }
  }
}

TEST(HotPathAllocations, TheCounterSeesAllocations) {  // the test above can fail
  const long before = g_allocations.load();
  auto* v = new std::vector<int>(100);
  delete v;
  EXPECT_GE(g_allocations.load() - before, 2);
}

}  // namespace
}  // namespace tern
