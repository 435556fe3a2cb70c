#pragma once
// ThreadPool — a fixed set of workers for data-parallel kernels (matvec rows,
// attention heads). Built for many tiny calls per token: a call allocates
// nothing, publishes one job, and the calling thread works on it too. Idle
// workers spin briefly (the next kernel usually follows within microseconds)
// and then sleep on a condition variable so an idle engine costs no CPU.
//
// Determinism: parallel_for only decides *which thread* runs a chunk of
// [0, n). Kernels compute every output element inside one chunk with a fixed
// order, so their results do not depend on the thread count or the split.
//
// Owned by whoever runs the model (one pool per engine); not copyable.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tern {

class ThreadPool {
 public:
  // How long an idle worker (or a caller waiting for stragglers) spins before
  // it sleeps. Decode issues a kernel every few microseconds, so a sleeping
  // worker would pay a futex wake-up (~5-50 us) on nearly every call.
  static constexpr std::chrono::microseconds kDefaultSpin{200};

  // `threads` counts every thread that works, the caller included: 1 runs each
  // call inline and starts no thread. Throws tern::Error if threads < 1.
  explicit ThreadPool(int threads, std::chrono::microseconds spin = kDefaultSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that work on a call, the caller included.
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on contiguous, disjoint chunks that cover [0, n)
  // exactly once, on this thread and the workers; returns when all are done.
  // No chunk is smaller than `min_chunk` (except when n itself is), so a
  // kernel can keep tiny problems on one thread.
  //
  // - If fn throws, the remaining chunks are skipped and the first exception
  //   is rethrown here, after every thread has left fn.
  // - Nested use is supported by running inline: a parallel_for issued from
  //   inside fn (on any pool) calls fn(0, n) on the current thread.
  // - Calls from several outside threads are serialized.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t min_chunk, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, min_chunk, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t begin, int64_t end) { (*static_cast<F*>(ctx))(begin, end); });
  }
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    parallel_for(n, 1, std::forward<Fn>(fn));
  }

  // Whether the current thread is inside a parallel_for body of any pool.
  static bool in_parallel_region();

 private:
  using Invoke = void (*)(void* ctx, int64_t begin, int64_t end);

  void run(int64_t n, int64_t min_chunk, void* ctx, Invoke invoke);
  void worker_main();
  // Claims and runs chunks of the current job until none are left.
  void work_on_job();
  void run_chunk(uint32_t index, uint32_t chunks);
  void wait_until_done();

  // The job being run. Written by the caller before it publishes `claim_`,
  // read by a thread only after it claimed a chunk, and not rewritten until
  // every chunk has finished — so plain fields are race-free.
  struct Job {
    void* ctx = nullptr;
    Invoke invoke = nullptr;
    int64_t n = 0;
  };
  Job job_;

  // (chunks << 32) | next chunk to hand out. One fetch_add claims a chunk and
  // tells how many there are; a late worker that claims past the end simply
  // finds nothing to do, and one that lands on the next job does a chunk of it.
  alignas(64) std::atomic<uint64_t> claim_{0};
  // Chunks of the current job not yet finished.
  alignas(64) std::atomic<int64_t> remaining_{0};
  // Bumped once per job; idle workers watch it.
  alignas(64) std::atomic<uint64_t> wake_gen_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopping_{false};

  std::mutex sleep_mutex_;
  std::condition_variable wake_cv_;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  std::mutex submit_mutex_;  // serializes callers from different threads
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
};

}  // namespace tern
