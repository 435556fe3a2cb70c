#pragma once
// Process memory figures from /proc/self/status (Linux); 0 where unavailable.
#include <cstdint>

namespace tern {

uint64_t current_rss_bytes();
uint64_t peak_rss_bytes();  // VmHWM: the high-water mark of resident memory
uint64_t physical_memory_bytes();

}  // namespace tern
