#include "tern/bench/memory_bandwidth.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
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
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  for (uint64_t i = 0; i + 64 <= n; i += 64) {
    acc0 = _mm256_xor_si256(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    acc1 = _mm256_xor_si256(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
  }
  acc0 = _mm256_xor_si256(acc0, acc1);
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
