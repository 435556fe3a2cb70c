#include "tern/core/memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace tern {

namespace {

uint64_t status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t klen = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, klen) == 0 && line[klen] == ':') {
      kb = std::strtoull(line + klen + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace

uint64_t current_rss_bytes() { return status_kb("VmRSS"); }
uint64_t peak_rss_bytes() { return status_kb("VmHWM"); }

uint64_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

uint64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return physical_memory_bytes();
}

uint64_t cgroup_memory_limit_bytes() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  uint64_t limit = 0;
  auto read_limit = [](const std::string& path) -> uint64_t {
    std::ifstream f(path);
    std::string v;
    if (!(f >> v) || v == "max") return 0;
    const uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
    return n >= (1ull << 60) ? 0 : n;  // v1 reports "no limit" as a huge number
  };
  while (std::getline(cg, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    uint64_t l = 0;
    if (controllers == "memory") l = read_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
    else if (controllers.empty()) l = read_limit("/sys/fs/cgroup" + path + "/memory.max");
    if (l > 0) limit = limit == 0 ? l : std::min(limit, l);
  }
  return limit;
}

}  // namespace tern
