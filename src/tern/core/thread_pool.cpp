#include "tern/core/thread_pool.h"

#include <algorithm>

#include "tern/core/error.h"

namespace tern {
namespace {

// Chunks handed out per thread. More than one lets a thread that woke late
// (or was preempted — the pool shares cores with I/O threads) lose only a
// small share of the work: the others claim its chunks.
constexpr int64_t kChunksPerThread = 4;

// Set while the current thread runs a parallel_for body (workers: always).
thread_local bool t_in_parallel_region = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until pred() or `spin` has elapsed; the clock is read only every 64
// rounds so the check costs little against the pause instruction.
template <typename Pred>
bool spin_until(Pred pred, std::chrono::microseconds spin) {
  if (pred()) return true;
  if (spin.count() <= 0) return false;
  auto deadline = std::chrono::steady_clock::now() + spin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads, std::chrono::microseconds spin) : spin_(spin) {
  if (threads < 1) fail("thread pool needs at least 1 thread, got {}", threads);
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_main(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  wake_gen_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::lock_guard lock(sleep_mutex_);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::in_parallel_region() { return t_in_parallel_region; }

void ThreadPool::run(int64_t n, int64_t min_chunk, void* ctx, Invoke invoke) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  // floor: every chunk gets at least min_chunk items.
  int64_t chunks = std::min<int64_t>(n / min_chunk, size() * kChunksPerThread);
  // Inline: a one-thread pool, a problem too small to split, or a nested call
  // (a worker waiting on its own pool would deadlock).
  if (chunks <= 1 || t_in_parallel_region) {
    invoke(ctx, 0, n);
    return;
  }

  std::lock_guard submit(submit_mutex_);
  job_ = Job{ctx, invoke, n};
  failed_.store(false, std::memory_order_relaxed);
  remaining_.store(chunks, std::memory_order_relaxed);
  // Release: a thread whose claim reads this value sees job_ and remaining_.
  claim_.store(static_cast<uint64_t>(chunks) << 32, std::memory_order_release);
  wake_gen_.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the sleepers_ increment in worker_main: either the worker sees
  // the new generation or we see it asleep and wake it.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    {
      std::lock_guard lock(sleep_mutex_);
    }
    wake_cv_.notify_all();
  }

  t_in_parallel_region = true;
  work_on_job();
  t_in_parallel_region = false;
  wait_until_done();

  if (failed_.load(std::memory_order_acquire)) {
    std::exception_ptr error;
    {
      std::lock_guard lock(error_mutex_);
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }
}

void ThreadPool::work_on_job() {
  for (;;) {
    uint64_t claim = claim_.fetch_add(1, std::memory_order_acq_rel);
    auto index = static_cast<uint32_t>(claim);
    auto chunks = static_cast<uint32_t>(claim >> 32);
    if (index >= chunks) return;
    run_chunk(index, chunks);
  }
}

void ThreadPool::run_chunk(uint32_t index, uint32_t chunks) {
  // Same boundaries whichever thread runs the chunk: floor(n * c / chunks),
  // computed without overflowing for any n.
  int64_t n = job_.n;
  int64_t q = n / chunks, r = n % chunks;
  int64_t begin = q * index + std::min<int64_t>(index, r);
  int64_t end = begin + q + (index < r ? 1 : 0);
  if (!failed_.load(std::memory_order_relaxed)) {
    try {
      job_.invoke(job_.ctx, begin, end);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_release);
    }
  }
  // The last chunk to finish wakes the caller if it went to sleep.
  if (remaining_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      caller_sleeping_.load(std::memory_order_seq_cst)) {
    {
      std::lock_guard lock(done_mutex_);
    }
    done_cv_.notify_one();
  }
}

void ThreadPool::wait_until_done() {
  auto done = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (spin_until(done, spin_)) return;
  std::unique_lock lock(done_mutex_);
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  while (remaining_.load(std::memory_order_seq_cst) != 0) done_cv_.wait(lock);
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker_main() {
  t_in_parallel_region = true;  // a worker never submits to a pool
  uint64_t seen = 0;
  for (;;) {
    auto changed = [&] { return wake_gen_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(changed, spin_)) {
      std::unique_lock lock(sleep_mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (wake_gen_.load(std::memory_order_seq_cst) == seen) wake_cv_.wait(lock);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = wake_gen_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    work_on_job();
  }
}

}  // namespace tern
