#pragma once
// Synth presets: named config.json bodies per architecture, from toy sizes
// for unit tests to the real shapes of released models.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/tokenizer/synthetic.h"

namespace tern {

struct SynthPreset {
  std::string architecture;
  std::string name;
  std::string description;
  nlohmann::json config;  // without vocab_size when it should follow the tokenizer
};

// What synth writes around the weights for an architecture's family: the
// synthetic tokenizer's flavour, the special tokens config.json and
// generation_config.json name, and how generic override fields (the CLI's
// --experts, --moe-ffn, --top-k) are spelled in this family's config.json.
struct SynthFamily {
  SyntheticSpecials specials;
  // config.json fields set to the id of a token piece, e.g. {"eos_token_id", "<|im_end|>"};
  // a field named more than once becomes a list of ids.
  std::vector<std::pair<std::string, std::string>> config_token_ids;
  std::vector<std::string> eos;  // generation_config eos_token_id (present ones)
  std::string bos, pad;          // generation_config bos/pad_token_id (empty: none)
  nlohmann::json generation;     // other generation_config fields
  // generic field -> this family's fields (each set to the value)
  std::vector<std::pair<std::string, std::vector<std::string>>> field_aliases;
};

const std::vector<SynthPreset>& all_synth_presets();
// The family of an architecture (Qwen3's when it has no family of its own).
const SynthFamily& find_synth_family(const std::string& architecture);
// Throws listing the presets of the architecture.
const SynthPreset& find_synth_preset(const std::string& architecture, const std::string& name);

}  // namespace tern
