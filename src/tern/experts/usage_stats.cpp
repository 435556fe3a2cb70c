#include "tern/experts/usage_stats.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/hash.h"
#include "tern/experts/expert_cache.h"

namespace tern {

namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'U', 'S', 'E', '1'};
constexpr uint32_t kVersion = 1;

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
bool get(const std::string& in, size_t& at, T& v) {
  if (in.size() - at < sizeof v) return false;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return true;
}

uint32_t experts_per_layer(const TernModel& model) {
  uint32_t e = 0;
  for (const auto& l : model.manifest().expert_layers) e = std::max(e, static_cast<uint32_t>(l.num_experts));
  return e;
}

}  // namespace

uint64_t usage_model_id(const TernModel& model) {
  const std::string text = read_text_file(model.dir() / "manifest.json");
  return xxh3_64(text.data(), text.size());
}

std::optional<ExpertCounts> load_expert_usage(const std::filesystem::path& path, const TernModel& model,
                                              std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<ExpertCounts> {
    if (why) *why = path.string() + ": " + reason;
    return std::nullopt;
  };
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return refuse("absent");
  const std::string data = read_text_file(path);
  if (data.size() < sizeof kMagic + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    return refuse("not a Tern usage file");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, data.data() + data.size() - 8, 8);
  if (xxh3_64(data.data(), data.size() - 8) != stored_sum) return refuse("checksum mismatch (corrupt)");
  size_t at = sizeof kMagic;
  uint32_t version = 0, layers = 0, experts = 0;
  uint64_t id = 0;
  if (!get(data, at, version) || version != kVersion) return refuse("unsupported version");
  if (!get(data, at, id) || id != usage_model_id(model)) return refuse("written for another model");
  const auto& moe = model.manifest().expert_layers;
  if (!get(data, at, layers) || !get(data, at, experts) || layers != moe.size() || experts != experts_per_layer(model))
    return refuse("shape differs from the model");
  if (data.size() - 8 - at != static_cast<uint64_t>(layers) * experts * 8) return refuse("wrong size");
  ExpertCounts counts;
  for (const auto& l : moe)
    for (uint32_t e = 0; e < experts; ++e) {
      uint64_t n = 0;
      get(data, at, n);
      if (n > 0 && static_cast<int64_t>(e) < l.num_experts) counts[ExpertCache::key(l.layer, e)] = n;
    }
  return counts;
}

void save_expert_usage(const std::filesystem::path& path, const TernModel& model, const ExpertCounts& counts) {
  std::string out(kMagic, sizeof kMagic);
  const uint32_t experts = experts_per_layer(model);
  put(out, kVersion);
  put(out, usage_model_id(model));
  put(out, static_cast<uint32_t>(model.manifest().expert_layers.size()));
  put(out, experts);
  for (const auto& l : model.manifest().expert_layers)
    for (uint32_t e = 0; e < experts; ++e) {
      auto it = counts.find(ExpertCache::key(l.layer, e));
      put(out, it == counts.end() ? uint64_t{0} : it->second);
    }
  put(out, xxh3_64(out.data(), out.size()));
  write_file_atomic(path, out);
}

uint64_t pin_hottest(ExpertCache& cache, const Manifest& manifest, const ExpertCounts& counts, uint64_t bytes) {
  std::vector<std::pair<uint64_t, uint64_t>> hottest(counts.begin(), counts.end());
  std::sort(hottest.begin(), hottest.end(),
            [](const auto& a, const auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
  uint64_t pinned = 0;
  for (const auto& [key, count] : hottest) {
    const ExpertLayer* layer = manifest.find_expert_layer(static_cast<int64_t>(key >> 32));
    const auto expert = static_cast<int64_t>(key & 0xffffffffu);
    if (!layer || expert >= layer->num_experts || pinned + layer->stride > bytes) continue;
    cache.pin_hot(*layer, expert);
    pinned += layer->stride;
  }
  return pinned;
}

}  // namespace tern
