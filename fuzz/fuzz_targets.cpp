// The table of fuzz targets, for tern_fuzz_replay (each libFuzzer
// executable calls its own entry function directly).
#include "fuzz_target.h"

namespace tern::fuzz {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = {
      {"safetensors", fuzz_safetensors},
      {"config", fuzz_config},
      {"container", fuzz_container},
      {"tokenizer", fuzz_tokenizer},
      {"trace", fuzz_trace},
      {"usage", fuzz_usage},
  };
  return targets;
}

const FuzzTarget* find_fuzz_target(std::string_view name) {
  for (const FuzzTarget& t : fuzz_targets())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace tern::fuzz
