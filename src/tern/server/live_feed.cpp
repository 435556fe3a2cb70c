#include "tern/server/live_feed.h"

#include <algorithm>

#include <fmt/format.h>

namespace tern {

using json = nlohmann::ordered_json;

LiveFeed::LiveFeed(Engine& engine) : engine_(engine) {
  const auto& layers = engine.container().manifest().expert_layers;
  int64_t max_layer = 0;
  for (const auto& l : layers) {
    max_layer = std::max(max_layer, l.layer);
    experts_ = std::max(experts_, l.num_experts);
  }
  row_of_layer_.assign(static_cast<size_t>(std::max<int64_t>(max_layer + 1, engine.config().num_layers)), -1);
  for (const auto& l : layers) {
    row_of_layer_[static_cast<size_t>(l.layer)] = static_cast<int64_t>(layer_of_row_.size());
    layer_of_row_.push_back(l.layer);
  }
  counts_.assign(layer_of_row_.size() * static_cast<size_t>(experts_), 0);
}

void LiveFeed::on_step(const ForwardTrace& trace, int64_t rows) {
  {
    std::lock_guard lock(mu_);
    for (size_t l = 0; l < trace.routing.size() && l < row_of_layer_.size(); ++l) {
      const int64_t row = row_of_layer_[l];
      if (row < 0) continue;
      for (int32_t e : trace.routing[l].experts)
        if (e >= 0 && e < experts_) ++counts_[static_cast<size_t>(row * experts_ + e)];
    }
    ++steps_;
    rows_ += static_cast<uint64_t>(rows);
  }
  cv_.notify_all();
}

json LiveFeed::state() const {
  const ModelConfig& cfg = engine_.config();
  return {{"model", engine_.container().dir().filename().string()},
          {"architecture", cfg.architecture},
          {"layers", layer_of_row_},
          {"num_layers", cfg.num_layers},
          {"experts", experts_},
          {"top_k", cfg.num_experts_per_tok},
          {"context", engine_.context()},
          {"cache_budget", engine_.cache().budget()},
          {"trunk_bytes", engine_.model().resident_bytes()}};
}

LiveFeed::Cursor LiveFeed::cursor() const {
  std::lock_guard lock(mu_);
  return {steps_, counts_, {}};
}

std::vector<std::string> LiveFeed::resident_bitmaps() const {
  std::vector<std::vector<uint8_t>> bits(layer_of_row_.size(), std::vector<uint8_t>(static_cast<size_t>((experts_ + 3) / 4), 0));
  for (uint64_t key : engine_.cache().resident_keys()) {
    const auto layer = static_cast<int64_t>(key >> 32), expert = static_cast<int64_t>(key & 0xffffffffu);
    if (layer < 0 || layer >= static_cast<int64_t>(row_of_layer_.size()) || expert >= experts_) continue;
    const int64_t row = row_of_layer_[static_cast<size_t>(layer)];
    if (row < 0) continue;
    bits[static_cast<size_t>(row)][static_cast<size_t>(expert / 4)] |= static_cast<uint8_t>(1u << (expert % 4));
  }
  std::vector<std::string> out;
  for (const auto& row : bits) {
    std::string hex;
    for (uint8_t nibble : row) hex += "0123456789abcdef"[nibble];
    out.push_back(std::move(hex));
  }
  return out;
}

json LiveFeed::next(Cursor& c, const json& metrics, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, wait, [&] { return steps_ != c.steps; });
  const auto now = std::chrono::steady_clock::now();
  if (steps_ == c.steps && now - c.last_sent < std::chrono::seconds(2)) return nullptr;
  json routed = json::array();
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i] != c.counts[i]) {
      routed.push_back({static_cast<int64_t>(i) / experts_, static_cast<int64_t>(i) % experts_, counts_[i] - c.counts[i]});
      c.counts[i] = counts_[i];
    }
  const uint64_t new_steps = steps_ - c.steps;
  c.steps = steps_;
  const uint64_t rows = rows_;
  lock.unlock();
  c.last_sent = now;
  return {{"type", "tick"}, {"new_steps", new_steps}, {"steps", c.steps}, {"rows", rows}, {"routed", routed},
          {"resident", resident_bitmaps()}, {"metrics", metrics}};
}

}  // namespace tern
