#include "tern/models/model.h"

#include <string_view>

#include "tern/core/error.h"

namespace tern {

// One factory per architecture, each in its own file.
std::unique_ptr<Model> make_qwen3_moe(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);

KVCache Model::make_kv_cache(int64_t max_positions) const {
  const ModelConfig& c = config();
  return KVCache(c.num_layers, max_positions, c.num_kv_heads * c.head_dim);
}

std::unique_ptr<Model> load_model(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                  const ModelOptions& options) {
  const std::string& arch = model.config().architecture;
  if (arch == "qwen3_moe") return make_qwen3_moe(model, cache, pool, options);
  fail("architecture '{}' is recognised but has no forward pass yet", arch);
}

}  // namespace tern
