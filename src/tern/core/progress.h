#pragma once
// Progress — reports progress of a long byte-oriented job on stderr: a
// redrawn bar (bytes, rate, ETA) on a terminal, plain lines otherwise.
#include <chrono>
#include <cstdint>
#include <string>

namespace tern {

class Progress {
 public:
  // total_bytes may be 0 if unknown. quiet suppresses all output.
  Progress(std::string label, uint64_t total_bytes, bool quiet = false);
  ~Progress();
  void add(uint64_t bytes);
  void finish();

 private:
  void draw(bool final);
  std::string label_;
  uint64_t total_;
  uint64_t done_ = 0;
  bool quiet_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_percent_line_ = -1;
};

}  // namespace tern
