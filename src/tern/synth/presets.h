#pragma once
// Synth presets: named config.json bodies per architecture, from toy sizes
// for unit tests to the real shapes of released models.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tern {

struct SynthPreset {
  std::string architecture;
  std::string name;
  std::string description;
  nlohmann::json config;  // without vocab_size when it should follow the tokenizer
};

const std::vector<SynthPreset>& all_synth_presets();
// Throws listing the presets of the architecture.
const SynthPreset& find_synth_preset(const std::string& architecture, const std::string& name);

}  // namespace tern
