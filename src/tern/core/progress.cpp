#include "tern/core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "tern/core/units.h"

namespace tern {

Progress::Progress(std::string label, uint64_t total_bytes, bool quiet)
    : label_(std::move(label)),
      total_(total_bytes),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_ && tty_ && !quiet_) std::fputc('\n', stderr);
}

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= std::chrono::milliseconds(tty_ ? 200 : 5000)) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  draw(true);
  finished_ = true;
}

void Progress::draw(bool final) {
  if (quiet_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  double frac = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 0;
  double eta = rate > 0 && total_ > done_ ? static_cast<double>(total_ - done_) / rate : 0;
  std::string rate_s = format_bytes(static_cast<uint64_t>(rate)) + "/s";
  if (tty_) {
    constexpr int kWidth = 30;
    int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %s / %s  %s  ETA %s   ", label_.c_str(), bar.c_str(),
                 frac * 100, format_bytes(done_).c_str(), format_bytes(total_).c_str(),
                 rate_s.c_str(), final ? "done" : format_duration(eta).c_str());
    if (final) std::fputc('\n', stderr);
  } else {
    int pct = static_cast<int>(frac * 100);
    if (!final && pct == last_percent_line_) return;
    last_percent_line_ = pct;
    std::fprintf(stderr, "%s: %d%% %s / %s, %s, %s %s\n", label_.c_str(), pct,
                 format_bytes(done_).c_str(), format_bytes(total_).c_str(), rate_s.c_str(),
                 final ? "took" : "ETA",
                 final ? format_duration(elapsed).c_str() : format_duration(eta).c_str());
  }
  std::fflush(stderr);
}

}  // namespace tern
