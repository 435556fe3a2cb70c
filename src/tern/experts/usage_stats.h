#pragma once
// usage.bin — how often each expert was demanded, kept beside a model so a
// later run can pin the hottest experts at start-up (--pin-hot) and seed the
// LFU policy. Little-endian:
//   "TERNUSE1" | u32 version (1) | u64 model id (xxh3 of manifest.json) |
//   u32 layers | u32 experts per layer | u64 counts[layers][experts] (MoE
//   layers in manifest order) | u64 xxh3 of everything before it.
// A file of another version, for another model or with a bad checksum is
// refused with a warning and ignored, never trusted.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>

#include "tern/format/tern_model.h"

namespace tern {

// Keys are ExpertCache::key(layer, expert).
using ExpertCounts = std::unordered_map<uint64_t, uint64_t>;

// The model's identity for usage files: xxh3 of its manifest.json.
uint64_t usage_model_id(const TernModel& model);

// nullopt (and *why) when the file is absent, foreign or corrupt.
std::optional<ExpertCounts> load_expert_usage(const std::filesystem::path& path, const TernModel& model,
                                              std::string* why);
// Written atomically (temporary file + rename).
void save_expert_usage(const std::filesystem::path& path, const TernModel& model, const ExpertCounts& counts);

class ExpertCache;
// Pins (ExpertCache::pin_hot) the most demanded experts of `counts`, most
// demanded first (ties: lower layer, then lower expert), while they fit in
// `bytes`; returns the bytes pinned (--pin-hot). Keys of experts the model
// does not have are skipped.
uint64_t pin_hottest(ExpertCache& cache, const Manifest& manifest, const ExpertCounts& counts, uint64_t bytes);

}  // namespace tern
