// Fuzz target "usage": the input is a usage.bin (experts/usage_stats.h)
// beside the small qwen3_moe model of fuzz/data/container/qwen3_moe/. Its
// first byte is not part of the file but says what the target repairs, as
// an attacker could: bit 0 writes the model's real id at bytes 12..20, bit 1
// appends the right checksum (without them nearly every mutation would stop
// at the id or checksum check). The engine then starts as a user's run
// would, seeding LFU from the counts and pinning the hottest experts
// (--pin-hot): a file is used or refused with a clean tern::Error, never
// trusted beyond its checks. (The engine's start-up path, without the
// engine: a cache over the fixture's store, seeded and pinned as
// Engine::Engine does, then demands of both layers.)
#include <cstring>
#include <string>

#include "fuzz_target.h"
#include "tern/core/hash.h"
#include "tern/experts/expert_cache.h"
#include "tern/experts/usage_stats.h"

#ifndef TERN_FUZZ_DATA_DIR
#error "TERN_FUZZ_DATA_DIR must name fuzz/data"
#endif

namespace tern::fuzz {

namespace fs = std::filesystem;

namespace {

const fs::path& model_dir() {
  static const fs::path dir = [] {
    fs::path d = scratch_dir() / "usage" / "qwen3_moe";
    fs::create_directories(d);
    for (const char* name : {"trunk.bin", "experts.bin", "manifest.json"})
      fs::copy_file(fs::path(TERN_FUZZ_DATA_DIR) / "container" / "qwen3_moe" / name, d / name,
                    fs::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}

}  // namespace

void fuzz_usage(std::span<const uint8_t> input) {
  if (input.empty()) return;
  const fs::path& dir = model_dir();
  static const TernModel model = TernModel::open(dir);
  std::string file(reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1);
  if ((input[0] & 1) && file.size() >= 20) {
    const uint64_t id = usage_model_id(model);
    std::memcpy(file.data() + 12, &id, sizeof id);
  }
  if (input[0] & 2) {
    const uint64_t sum = xxh3_64(file.data(), file.size());
    file.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }
  write_file(dir / "usage.bin", file);

  std::string why;
  const auto counts = load_expert_usage(dir / "usage.bin", model, &why);
  if (!counts && why.empty()) broken("a refused usage file without a reason");
  if (counts)
    for (const auto& [key, n] : *counts) {
      const ExpertLayer* layer = model.manifest().find_expert_layer(static_cast<int64_t>(key >> 32));
      if (!layer || static_cast<int64_t>(key & 0xffffffffu) >= layer->num_experts || n == 0)
        broken("a usage count for an expert the model does not have");
    }
  run_expecting_clean_errors([&] {
    if (!counts) return;
    ExpertStoreOptions so;
    so.direct_io = false;
    so.verify = false;
    so.backend = IoBackend::Pread;
    static ExpertStore store(model, so);
    const auto& layers = model.manifest().expert_layers;
    const uint64_t stride = layers[0].stride;
    ExpertCache cache(store, 4 * stride, CachePolicy::Lfu);  // half the experts
    cache.add_demand_counts(*counts);
    const uint64_t pinned = pin_hottest(cache, model.manifest(), *counts, stride);
    if (pinned > stride) broken("pinned more than asked");
    for (const ExpertLayer& l : layers)
      for (int64_t e = 0; e < l.num_experts; ++e) cache.acquire(l, e);  // LFU evicts around the pinned one
    if (cache.used_bytes() > cache.budget()) broken("the cache outgrew its budget");
  });
}

}  // namespace tern::fuzz
