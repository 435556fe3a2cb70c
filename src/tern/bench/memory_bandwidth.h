#pragma once
// Measures this machine's memory read bandwidth the way a matvec sees it:
// streaming reads of a buffer far larger than the caches, split over the
// thread pool. The kernel benchmark reports its ratio to this number.
#include <cstdint>

namespace tern {

class ThreadPool;

struct BandwidthResult {
  double bytes_per_second = 0;  // median of the repeats
  uint64_t buffer_bytes = 0;
  int threads = 1;
};

BandwidthResult measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes = 1ull << 30, int repeats = 5);

// One timed streaming read of [data, data + bytes) over the pool; bytes/second.
double time_buffer_read(ThreadPool& pool, const uint8_t* data, uint64_t bytes);

}  // namespace tern
