#pragma once
// The .tern container's manifest: what every byte of trunk.bin and
// experts.bin is. Written last by `tern install` (its presence means the
// install completed); parsed and bounds-checked before any byte is trusted.
//
// Layout (docs/DESIGN.md): trunk.bin holds resident tensors, each 64-byte
// aligned. experts.bin holds, per MoE layer, a fixed-stride array of expert
// records; a record is the expert's sections (gate, up, down) back to back so
// one read fetches it; every record starts on a 4 KiB boundary (O_DIRECT).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/core/tensor_format.h"
#include "tern/format/model_config.h"

namespace tern {

inline constexpr int kManifestVersion = 1;
inline constexpr uint64_t kTrunkAlignment = 64;
inline constexpr uint64_t kExpertAlignment = 4096;

struct TrunkTensor {
  std::string name;
  TensorFormat format = TensorFormat::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in trunk.bin
  uint64_t size = 0;
  uint64_t checksum = 0;  // xxh3-64 of the tensor's bytes
};

// One section of an expert record (e.g. the gate projection).
struct ExpertSection {
  std::string name;
  TensorFormat format = TensorFormat::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // within the record
  uint64_t size = 0;
};

// Where one MoE layer's experts live in experts.bin.
struct ExpertLayer {
  int64_t layer = 0;
  uint64_t offset = 0;       // of expert 0, 4 KiB aligned
  uint64_t stride = 0;       // record_size rounded up to 4 KiB
  uint64_t record_size = 0;  // bytes of data per expert (sum of sections)
  int64_t num_experts = 0;
  std::vector<ExpertSection> sections;
  std::vector<uint64_t> checksums;  // xxh3-64 of each record's record_size bytes

  uint64_t expert_offset(int64_t expert) const { return offset + static_cast<uint64_t>(expert) * stride; }
  const ExpertSection* find_section(const std::string& name) const;
};

// A file copied verbatim into the container (tokenizer, configs).
struct ContainerFile {
  std::string name;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

struct Manifest {
  int version = kManifestVersion;
  std::string created_by;
  std::string architecture;
  nlohmann::json config;  // the model's Hugging Face config.json
  std::string trunk_file = "trunk.bin";
  std::string experts_file = "experts.bin";
  uint64_t trunk_size = 0;
  uint64_t experts_size = 0;
  std::vector<TrunkTensor> trunk;
  std::vector<ExpertLayer> expert_layers;  // MoE layers only, ascending
  std::vector<ContainerFile> files;
  nlohmann::json source;  // provenance: where it was installed from

  const TrunkTensor* find_trunk(const std::string& name) const;
  const ExpertLayer* find_expert_layer(int64_t layer) const;
};

nlohmann::json manifest_to_json(const Manifest& m);
// Validates structure and that every range is aligned and inside its file's
// declared size; throws tern::Error naming `source` and the entry.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& source);

// Checks that a manifest and its parsed config agree, using the
// architecture's tensor declarations: every trunk tensor the config implies
// is listed once with that shape (and no other), in a format the engine
// reads for its role; the expert layers are exactly the config's MoE layers,
// with num_experts records of the declared sections back to back, the
// record size their sum and the stride that rounded to 4 KiB; trunk tensors
// and expert layers do not overlap. After this, buffers may be sized from
// either. Throws tern::Error naming `source` and the tensor or layer.
void check_manifest_against_config(const Manifest& m, const ModelConfig& cfg, const std::string& source);

}  // namespace tern
