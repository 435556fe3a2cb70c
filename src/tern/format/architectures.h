#pragma once
// The architecture registry. An architecture is described by data the rest
// of Tern reads: how its config.json parses, which tensors a checkpoint of it
// holds (with shapes, and which are routed-expert weights), and how synth
// should initialise each. Adding an architecture = one arch_<name>.cpp plus
// one line in architectures.cpp; nothing else changes.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/format/config_reader.h"
#include "tern/format/model_config.h"

namespace tern {

// How `tern synth` fills a tensor with random values.
enum class WeightInit {
  Ones,       // norm weights: 1 + small noise
  Linear,     // projections: uniform with std 1/sqrt(fan_in)
  Router,     // router: larger spread so routing is not degenerate
  Embedding,  // embeddings: std 1
  Zeros,      // biases
};

// One tensor an architecture's checkpoint must contain.
struct TensorDecl {
  std::string name;
  std::vector<int64_t> shape;
  WeightInit init = WeightInit::Linear;
  // Routed-expert weights go to experts.bin; everything else is trunk.
  bool is_expert = false;
  int64_t layer = -1;
  int64_t expert = -1;
  std::string section;  // within an expert record: e.g. "gate", "up", "down"
  // The config.json fields each dimension comes from ("hidden_size",
  // "num_attention_heads x head_dim"), for errors when a file disagrees.
  std::vector<std::string_view> dim_fields;
};

// "[a, b]" with the fields of decl's dimensions, e.g. "[num_experts, hidden_size]".
std::string dim_fields_str(const TensorDecl& decl);

struct ArchSpec {
  std::string_view model_type;
  // Fills cfg from config.json and validates it; throws tern::Error naming
  // the field. Shared field readers live in config_reader.h.
  void (*parse)(const ConfigReader& config, ModelConfig& cfg);
  // Every tensor of a checkpoint, trunk then experts, in a stable order.
  std::vector<TensorDecl> (*tensors)(const ModelConfig& cfg);
  // The sections of one expert record, in on-disk order.
  std::vector<std::string> expert_sections;
};

// Throws "unsupported architecture X; supported: a, b".
const ArchSpec& find_arch(std::string_view model_type);
std::vector<std::string_view> supported_architectures();

}  // namespace tern
