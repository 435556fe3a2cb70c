#pragma once
// TernModel — an installed .tern container opened for reading: manifest
// parsed and bounds-checked against the real file sizes, model config
// parsed, trunk.bin and experts.bin open. Reads are positional (pread), so
// one TernModel can serve many threads.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tern/core/file.h"
#include "tern/format/model_config.h"
#include "tern/format/tern_manifest.h"

namespace tern {

// One problem `verify` found: what, where (file + offset), and why.
struct VerifyIssue {
  std::string what;  // "trunk tensor 'x'" or "expert (layer 3, expert 17)" or "file tokenizer.json"
  std::string file;
  uint64_t offset = 0;
  std::string problem;
  std::string message() const;
};

struct VerifyReport {
  uint64_t bytes_checked = 0;
  uint64_t trunk_tensors = 0;
  uint64_t experts = 0;
  uint64_t files = 0;
  std::vector<VerifyIssue> issues;
  bool ok() const { return issues.empty(); }
};

// Sizes of an installed model, for `tern info`.
struct ModelSummary {
  uint64_t total_params = 0;
  uint64_t active_params = 0;   // per token: trunk + top-k experts of every MoE layer
  uint64_t trunk_params = 0;
  uint64_t expert_params = 0;   // all routed experts
  uint64_t trunk_bytes = 0;
  uint64_t expert_bytes = 0;    // all expert records
  uint64_t expert_bytes_per_token = 0;  // read per token when nothing is cached
  int64_t moe_layers = 0;
  int64_t experts_per_layer = 0;
  int64_t experts_per_token = 0;
};

class TernModel {
 public:
  static TernModel open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const ModelConfig& config() const { return config_; }
  const File& trunk_file() const { return trunk_; }
  const File& experts_file() const { return experts_; }

  // Reads a trunk tensor; verifies its checksum unless verify = false.
  void read_trunk(const TrunkTensor& tensor, void* dst, bool verify = true) const;
  const TrunkTensor& trunk_tensor(const std::string& name) const;  // throws naming it
  // Reads one expert record (record_size bytes) into dst.
  void read_expert(const ExpertLayer& layer, int64_t expert, void* dst) const;
  // Checks an expert record's bytes against its checksum; throws naming
  // (layer, expert) and the file offset on mismatch.
  void check_expert(const ExpertLayer& layer, int64_t expert, const void* record) const;

  // Re-reads every byte and checks every checksum and size. `on_bytes` is
  // called with progress. Bytes read are dropped from the page cache.
  VerifyReport verify(const std::function<void(uint64_t)>& on_bytes = {}) const;
  uint64_t verify_total_bytes() const;

  ModelSummary summary() const;

 private:
  std::filesystem::path dir_;
  Manifest manifest_;
  ModelConfig config_;
  File trunk_;
  File experts_;
};

}  // namespace tern
