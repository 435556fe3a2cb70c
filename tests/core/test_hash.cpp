// xxh3_64 and Hasher (the dispatching, widest-SIMD entry points of libxxhash
// on x86-64) give the hashes of the library's baseline XXH3_64bits, which
// every record checksum in a .tern model was made with: any length, any
// alignment, and fed in pieces.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tern/core/hash.h"

namespace tern {
namespace {

TEST(Hash, MatchesTheBaselineXxh3AtEveryLengthAndAlignment) {
  EXPECT_EQ(xxh3_64(nullptr, 0), 0x2D06800538D394C2ull);  // XXH3_64bits of no bytes, seed 0
  std::mt19937_64 rng(7);
  std::vector<uint8_t> bytes((size_t{3} << 20) + 64);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);  // XXH3's short-input branches end at 240
  for (size_t n : {1023, 1024, 1025, 4096, 65536, 2654208, 3 << 20}) lengths.push_back(n);
  for (size_t n : lengths)
    for (size_t offset : {0, 1, 7, 32}) {
      if (offset + n > bytes.size()) continue;
      const uint8_t* p = bytes.data() + offset;
      ASSERT_EQ(xxh3_64(p, n), XXH3_64bits(p, n)) << "length " << n << " offset " << offset;
    }
  // Streamed in uneven pieces.
  for (size_t n : {0, 100, 5000, 2654208}) {
    Hasher h;
    size_t done = 0;
    while (done < n) {
      const size_t piece = std::min<size_t>(n - done, 1 + rng() % 70000);
      h.update(bytes.data() + done, piece);
      done += piece;
    }
    EXPECT_EQ(h.digest(), XXH3_64bits(bytes.data(), n)) << "length " << n;
  }
}

}  // namespace
}  // namespace tern
