#include "tern/core/hash.h"

#include <xxhash.h>
#if defined(__x86_64__)
// The dispatching entry points pick the widest SIMD path the CPU has (SSE2,
// AVX2, AVX-512) at first call; the plain ones are built for the x86-64
// baseline, SSE2: 13 GB/s against 21-27 GB/s on a 2.6 MB record just read
// from disk, 63 against 13 warm (docs/RESULTS.md, 2026-12-07). Same hashes.
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define TERN_XXH3(data, n) XXH3_64bits_dispatch(data, n)
#define TERN_XXH3_UPDATE(state, data, n) XXH3_64bits_update_dispatch(state, data, n)
#else
#define TERN_XXH3(data, n) XXH3_64bits(data, n)
#define TERN_XXH3_UPDATE(state, data, n) XXH3_64bits_update(state, data, n)
#endif

#include "tern/core/error.h"

namespace tern {

uint64_t xxh3_64(const void* data, size_t n) { return TERN_XXH3(data, n); }

std::string hash_hex(uint64_t h) { return fmt::format("{:016x}", h); }

uint64_t parse_hash_hex(std::string_view hex) {
  if (hex.size() != 16) fail("invalid checksum '{}': expected 16 hex digits", printable(hex));
  uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else fail("invalid checksum '{}': expected 16 hex digits", printable(hex));
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

Hasher::Hasher() : state_(XXH3_createState()) { reset(); }
Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Hasher::update(const void* data, size_t n) {
  TERN_XXH3_UPDATE(static_cast<XXH3_state_t*>(state_), data, n);
}
uint64_t Hasher::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }
void Hasher::reset() { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }

}  // namespace tern

#undef TERN_XXH3
#undef TERN_XXH3_UPDATE
