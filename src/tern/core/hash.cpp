#include "tern/core/hash.h"

#include <xxhash.h>

#include "tern/core/error.h"

namespace tern {

uint64_t xxh3_64(const void* data, size_t n) { return XXH3_64bits(data, n); }

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
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}
uint64_t Hasher::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }
void Hasher::reset() { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }

}  // namespace tern
