#include "tern/core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tern/core/error.h"

namespace tern {
namespace {

// Runs one parallel_for and checks each index in [0, n) was visited once and
// every chunk respected min_chunk.
void expect_exact_cover(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallel_for(n, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard lock(mutex);
    chunks.emplace_back(begin, end);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  for (auto [begin, end] : chunks) {
    EXPECT_LT(begin, end);
    if (chunks.size() > 1) {
      EXPECT_GE(end - begin, min_chunk) << "n " << n;
    }
  }
  EXPECT_LE(static_cast<int64_t>(chunks.size()), std::max<int64_t>(1, 4 * pool.size()));
}

TEST(ThreadPool, SizeCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
}

TEST(ThreadPool, RejectsFewerThanOneThread) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(-2), Error);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 100, 1001, 12345})
      for (int64_t min_chunk : {1, 7, 1000}) expect_exact_cover(pool, n, min_chunk);
  }
}

TEST(ThreadPool, ManySmallCallsEachCompleteBeforeReturning) {
  ThreadPool pool(3);
  std::vector<int64_t> data(16, 0);
  for (int call = 0; call < 20000; ++call) {
    // Each call reads what the previous call wrote: a call that returned
    // early would be caught by the final check.
    pool.parallel_for(16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[static_cast<size_t>(i)] += 1;
    });
  }
  for (int64_t v : data) EXPECT_EQ(v, 20000);
}

TEST(ThreadPool, SleepingWorkersWakeForLaterCalls) {
  ThreadPool pool(3, std::chrono::microseconds(0));  // workers sleep at once
  for (int call = 0; call < 200; ++call) {
    if (call % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    expect_exact_cover(pool, 37, 1);
  }
}

TEST(ThreadPool, UsesWorkerThreadsWhenWorkIsLarge) {
  ThreadPool pool(2, std::chrono::milliseconds(50));
  std::mutex mutex;
  std::vector<std::thread::id> ids;
  // Chunks that wait a little give the worker time to claim one.
  for (int attempt = 0; attempt < 50 && ids.size() < 2; ++attempt) {
    pool.parallel_for(8, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lock(mutex);
      auto id = std::this_thread::get_id();
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    });
  }
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPool, TernErrorFromBodyReachesCaller) {
  ThreadPool pool(3);
  try {
    pool.parallel_for(100, [&](int64_t begin, int64_t end) {
      if (begin <= 42 && 42 < end) fail("bad element {}", 42);
    });
    ADD_FAILURE() << "expected tern::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad element 42");
  }
  // The pool is still usable afterwards.
  expect_exact_cover(pool, 100, 1);
}

TEST(ThreadPool, StdExceptionFromBodyReachesCaller) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_THROW(pool.parallel_for(64, [](int64_t, int64_t) { throw std::out_of_range("x"); }),
                 std::out_of_range);
    expect_exact_cover(pool, 64, 1);
  }
}

TEST(ThreadPool, NestedCallRunsInlineOnTheCallingThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(50 * 20);
  pool.parallel_for(50, [&](int64_t begin, int64_t end) {
    EXPECT_TRUE(ThreadPool::in_parallel_region());
    for (int64_t i = begin; i < end; ++i) {
      auto outer_thread = std::this_thread::get_id();
      pool.parallel_for(20, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer_thread);
        for (int64_t j = b; j < e; ++j) hits[static_cast<size_t>(i * 20 + j)].fetch_add(1);
      });
    }
  });
  EXPECT_FALSE(ThreadPool::in_parallel_region());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, CallsFromSeveralThreadsAreSerialized) {
  ThreadPool pool(2);
  std::vector<std::atomic<int64_t>> sums(2);
  auto caller = [&](int slot) {
    for (int call = 0; call < 2000; ++call)
      pool.parallel_for(10, [&](int64_t begin, int64_t end) { sums[slot].fetch_add(end - begin); });
  };
  std::thread a(caller, 0), b(caller, 1);
  a.join();
  b.join();
  EXPECT_EQ(sums[0].load(), 20000);
  EXPECT_EQ(sums[1].load(), 20000);
}

TEST(ThreadPool, MinChunkKeepsSmallWorkOnTheCaller) {
  ThreadPool pool(4);
  int calls = 0;
  auto caller = std::this_thread::get_id();
  pool.parallel_for(10, 100, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tern
