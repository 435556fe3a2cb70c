#include "tern/core/timeline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace tern::timeline {

namespace {

struct Event {
  int64_t us;
  char kind;
  int64_t a, b;
};

struct Log {
  std::string path;
  std::mutex mu;
  std::vector<Event> events;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  Log() {
    if (const char* p = std::getenv("TERN_TIMELINE")) path = p;
    if (!path.empty()) events.reserve(1 << 20);
  }
  ~Log() {
    if (path.empty()) return;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "tern: warning: TERN_TIMELINE: cannot write %s\n", path.c_str());
      return;
    }
    for (const Event& e : events)
      std::fprintf(f, "%lld\t%c\t%lld\t%lld\n", static_cast<long long>(e.us), e.kind,
                   static_cast<long long>(e.a), static_cast<long long>(e.b));
    std::fclose(f);
  }
};

Log& log() {
  static Log l;
  return l;
}

}  // namespace

bool enabled() {
  static const bool on = !log().path.empty();
  return on;
}

void mark_slow(Kind kind, int64_t a, int64_t b) {
  Log& l = log();
  // The clock is read under the lock so the log is in time order across
  // threads (tools/timeline.py walks it as one sequence of moments).
  std::lock_guard lock(l.mu);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - l.start)
                      .count();
  l.events.push_back({us, static_cast<char>(kind), a, b});
}

}  // namespace tern::timeline
