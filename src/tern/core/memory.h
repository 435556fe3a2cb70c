#pragma once
// Process memory figures from /proc/self/status (Linux); 0 where unavailable.
#include <cstdint>

namespace tern {

uint64_t current_rss_bytes();
uint64_t peak_rss_bytes();  // VmHWM: the high-water mark of resident memory
uint64_t physical_memory_bytes();
// MemAvailable from /proc/meminfo: what can be allocated without swapping.
uint64_t available_memory_bytes();
// The memory limit of this process's cgroup (v1 memory.limit_in_bytes or v2
// memory.max; it counts page cache too), or 0 when there is none.
uint64_t cgroup_memory_limit_bytes();

}  // namespace tern
