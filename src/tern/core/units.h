#pragma once
// Human sizes: "512M", "4G", "1.5GiB" <-> bytes.
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// Accepts a number with optional K/M/G/T suffix (binary: 1K = 1024), optional
// "i"/"iB"/"B". Throws tern::Error naming the text on anything else.
uint64_t parse_size(std::string_view text);
// "1.50 GiB", "312.0 MiB", "17 B".
std::string format_bytes(uint64_t bytes);
std::string format_duration(double seconds);

}  // namespace tern
