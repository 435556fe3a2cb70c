#include "tern/bench/memory_bandwidth.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "tern/core/aligned_buffer.h"
#include "tern/core/thread_pool.h"

namespace tern {

namespace {

#if defined(__x86_64__)
// Sums 32-byte lanes; the result is used so the loads are not optimised away.
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, uint64_t n) {
  // Four independent accumulators and a software prefetch 1 KiB ahead keep
  // enough loads in flight to saturate DRAM (as the matvec kernels do).
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 128 <= n; i += 128) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i + 1024), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + i + 1088), _MM_HINT_T0);
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  __m256i acc0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc0);
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
}
#endif

uint64_t read_portable(const uint8_t* p, uint64_t n) {
  uint64_t acc = 0;
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    acc ^= v;
  }
  return acc;
}

}  // namespace

double time_buffer_read(ThreadPool& pool, const uint8_t* data, uint64_t bytes) {
  const uint64_t chunk = 1 << 20;
  const int64_t chunks = static_cast<int64_t>(bytes / chunk);
  if (chunks == 0) return 0;
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && reinterpret_cast<uintptr_t>(data) % 32 == 0;
#endif
  std::atomic<uint64_t> sink{0};
  auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(chunks, [&](int64_t b, int64_t e) {
    uint64_t acc = 0;
    for (int64_t c = b; c < e; ++c) {
      const uint8_t* p = data + static_cast<uint64_t>(c) * chunk;
#if defined(__x86_64__)
      acc ^= avx2 ? read_avx2(p, chunk) : read_portable(p, chunk);
#else
      acc ^= read_portable(p, chunk);
#endif
    }
    sink.fetch_xor(acc, std::memory_order_relaxed);
  });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(static_cast<uint64_t>(chunks) * chunk) / s;
}

BandwidthResult measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes, int repeats) {
  const uint64_t chunk = 1 << 20;
  buffer_bytes = std::max(chunk, buffer_bytes / chunk * chunk);
  AlignedBuffer buf(buffer_bytes, 4096);
  // Touch every page with non-zero data so reads hit real memory.
  for (uint64_t i = 0; i < buffer_bytes; i += 8) {
    uint64_t v = i * 0x9e3779b97f4a7c15ull;
    std::memcpy(buf.data() + i, &v, 8);
  }
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  std::vector<uint64_t> sink(static_cast<size_t>(buffer_bytes / chunk));
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(buffer_bytes / chunk), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const uint8_t* p = buf.data() + static_cast<uint64_t>(c) * chunk;
#if defined(__x86_64__)
        sink[static_cast<size_t>(c)] = avx2 ? read_avx2(p, chunk) : read_portable(p, chunk);
#else
        sink[static_cast<size_t>(c)] = read_portable(p, chunk);
#endif
      }
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(buffer_bytes) / s);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep ^ v;
  (void)keep;
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], buffer_bytes, pool.size()};
}

}  // namespace tern
