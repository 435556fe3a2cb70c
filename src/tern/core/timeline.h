#pragma once
// A diagnostic timeline of the streamer: with TERN_TIMELINE=PATH set, the
// engine marks when expert reads are queued, leave the device and are
// verified, when each layer's attention and MoE run, when a layer waits for a
// read and when the output head runs; the marks are written to PATH as
// tab-separated `microseconds kind a b` lines when the process exits.
// tools/timeline.py turns them into where the disk sat idle and why
// (docs/DESIGN.md). Unset, each mark is one predictable branch.
#include <cstdint>

namespace tern::timeline {

enum Kind : char {
  kQueued = 'q',  // a = layer, b = expert * 2 + urgent
  kDevice = 'c',  // read left the device (before its checksum): a = layer, b = expert
  kLanded = 'f',  // read verified and ready: a = layer, b = expert
  kLayer = 'l',   // a layer starts (its attention): a = layer
  kMoe = 'm',     // the MoE block starts, after its router: a = layer
  kMoeEnd = 'M',  // a = layer
  kWait = 'w',    // the layer waits for a read: a = layer, b = expert
  kWaitEnd = 'W',
  kHead = 'h',  // the output head
  kHeadEnd = 'H',
};

bool enabled();
void mark_slow(Kind kind, int64_t a, int64_t b);
inline void mark(Kind kind, int64_t a = 0, int64_t b = 0) {
  if (enabled()) mark_slow(kind, a, b);
}

}  // namespace tern::timeline
