#pragma once
// LiveFeed — what the dashboard's expert grid shows, from the server's own
// forward steps: how often each (MoE layer, expert) was routed to, and
// which experts the cache holds. The scheduler reports every step's
// routing (on_step); each dashboard connection reads the counts added since
// its last event (next), over Server-Sent Events.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/runtime/engine.h"

namespace tern {

class LiveFeed {
 public:
  explicit LiveFeed(Engine& engine);

  // The scheduler thread, after each forward step.
  void on_step(const ForwardTrace& routing, int64_t rows);

  // The grid's shape and the model: {"model", "layers": [model layer of each
  // row], "experts", "top_k", "cache": {...}}.
  nlohmann::ordered_json state() const;

  struct Cursor {
    uint64_t steps = 0;
    std::vector<uint32_t> counts;  // as last sent
    std::chrono::steady_clock::time_point last_sent{};
  };
  Cursor cursor() const;
  // Waits up to `wait` for a new step. Returns the next event:
  //   {"type": "tick", "steps", "rows", "routed": [[row, expert, count], ...],
  //    "resident": [hex bitmap of each row's experts], "metrics": metrics}
  // (routed: counts since the cursor), or null when nothing changed and the
  // last event is under two seconds old.
  nlohmann::ordered_json next(Cursor& cursor, const nlohmann::ordered_json& metrics, std::chrono::milliseconds wait);

 private:
  std::vector<std::string> resident_bitmaps() const;

  Engine& engine_;
  std::vector<int64_t> row_of_layer_;  // model layer -> grid row, -1 for dense layers
  std::vector<int64_t> layer_of_row_;
  int64_t experts_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint32_t> counts_;  // [row * experts + expert], since start
  uint64_t steps_ = 0, rows_ = 0;
};

}  // namespace tern
