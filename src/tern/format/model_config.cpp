#include "tern/format/model_config.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"

namespace tern {

using nlohmann::json;

bool ModelConfig::layer_is_moe(int64_t layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::layer_is_sliding(int64_t layer) const {
  return sliding_window > 0 && layer >= 0 && static_cast<size_t>(layer) < sliding_layers.size() &&
         sliding_layers[static_cast<size_t>(layer)];
}

bool ModelConfig::layer_is_linear(int64_t layer) const {
  return linear_attention.present() && layer >= 0 && static_cast<size_t>(layer) < linear_attention.layers.size() &&
         linear_attention.layers[static_cast<size_t>(layer)];
}

int64_t ModelConfig::layer_head_dim(int64_t layer) const {
  return global_head_dim > 0 && !layer_is_sliding(layer) ? global_head_dim : head_dim;
}

int64_t ModelConfig::layer_kv_heads(int64_t layer) const {
  return layer_values_are_keys(layer) ? num_global_kv_heads : num_kv_heads;
}

bool ModelConfig::layer_values_are_keys(int64_t layer) const {
  return attention_k_eq_v && global_head_dim > 0 && !layer_is_sliding(layer);
}

int64_t ModelConfig::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers; ++l) n += layer_is_moe(l) ? 1 : 0;
  return n;
}

ModelConfig parse_model_config(const json& config, const std::string& source) {
  if (!config.is_object()) fail("{}: expected a JSON object", source);
  if (!config.contains("model_type") || !config["model_type"].is_string())
    fail("{}: no \"model_type\" string; is this a Hugging Face config.json?", source);
  auto model_type = config["model_type"].get<std::string>();
  const ArchSpec& arch = find_arch(model_type);
  ModelConfig cfg;
  cfg.architecture = model_type;
  cfg.raw = config;
  ConfigReader reader(config, source, model_type);
  arch.parse(reader, cfg);
  check_config_products(reader, cfg);
  return cfg;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  auto file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  if (!std::filesystem::exists(file)) fail("{}: not found (a model directory needs config.json)", file.string());
  return parse_model_config(parse_json(read_text_file(file), file.string()), file.string());
}

}  // namespace tern
