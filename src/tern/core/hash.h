#pragma once
// Checksums: xxh3-64 over byte ranges, one-shot or streamed, and its hex form
// as stored in manifests.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

uint64_t xxh3_64(const void* data, size_t n);
std::string hash_hex(uint64_t h);
// Parses 16 hex digits; throws tern::Error on anything else.
uint64_t parse_hash_hex(std::string_view hex);

// Incremental xxh3-64 (same result as xxh3_64 over the concatenation).
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* data, size_t n);
  uint64_t digest() const;
  void reset();

 private:
  void* state_;
};

}  // namespace tern
