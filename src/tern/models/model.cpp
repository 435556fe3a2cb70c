#include "tern/models/model.h"

#include <algorithm>
#include <string_view>

#include "tern/core/error.h"

namespace tern {

// One factory per architecture, each in its own file.
std::unique_ptr<Model> make_qwen3_moe(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_gpt_oss(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_mixtral(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_olmoe(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_qwen2_moe(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_deepseek_v3(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_glm4_moe(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_qwen3_next(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);
std::unique_ptr<Model> make_gemma4(const TernModel&, ExpertCache&, ThreadPool*, const ModelOptions&);

void Model::forward(std::span<const int32_t> tokens, int64_t start, KVCache& kv, float* logits, bool all_positions,
                    ForwardTrace* trace) {
  const SequenceBatch one{tokens, start, &kv, logits, all_positions};
  forward_batch(std::span<const SequenceBatch>(&one, 1), trace);
}

namespace {

// Per layer: positions kept (a sliding layer keeps its window), floats per
// position, and the floats of a state layer (linear attention keeps a fixed
// state and no positions). Multi-head latent attention keeps one latent +
// rope key per position, which serves as its values too.
struct KvLayout {
  std::vector<int64_t> capacity, width, state;
};
KvLayout kv_layout(const ModelConfig& c, int64_t max_positions) {
  KvLayout k;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool linear = c.layer_is_linear(l);
    k.capacity.push_back(linear                 ? 0
                         : c.layer_is_sliding(l) ? std::min(max_positions, c.sliding_window)
                                                 : max_positions);
    k.width.push_back(linear ? 0
                      : c.mla.present() ? c.mla.kv_lora_rank + c.mla.qk_rope_head_dim
                                        : c.layer_kv_heads(l) * c.layer_head_dim(l));
    k.state.push_back(linear ? c.linear_attention.state_floats() : 0);
  }
  return k;
}

}  // namespace

KVCache Model::make_kv_cache(int64_t max_positions) const {
  KvLayout k = kv_layout(config(), max_positions);
  return KVCache(max_positions, std::move(k.capacity), std::move(k.width), config().mla.present(), std::move(k.state));
}

uint64_t kv_cache_bytes(const ModelConfig& config, int64_t max_positions) {
  const KvLayout k = kv_layout(config, max_positions);
  uint64_t floats = 0, states = 0;
  for (size_t l = 0; l < k.capacity.size(); ++l) {
    floats += static_cast<uint64_t>(k.capacity[l] * k.width[l]);
    states += static_cast<uint64_t>(k.state[l]);
  }
  return ((config.mla.present() ? 1 : 2) * floats + states) * sizeof(float);
}

std::unique_ptr<Model> load_model(const TernModel& model, ExpertCache& cache, ThreadPool* pool,
                                  const ModelOptions& options) {
  const std::string& arch = model.config().architecture;
  if (arch == "qwen3_moe") return make_qwen3_moe(model, cache, pool, options);
  if (arch == "gpt_oss") return make_gpt_oss(model, cache, pool, options);
  if (arch == "mixtral") return make_mixtral(model, cache, pool, options);
  if (arch == "olmoe") return make_olmoe(model, cache, pool, options);
  if (arch == "qwen2_moe") return make_qwen2_moe(model, cache, pool, options);
  if (arch == "deepseek_v3") return make_deepseek_v3(model, cache, pool, options);
  if (arch == "glm4_moe") return make_glm4_moe(model, cache, pool, options);
  if (arch == "qwen3_next") return make_qwen3_next(model, cache, pool, options);
  if (arch == "gemma4" || arch == "gemma4_text") return make_gemma4(model, cache, pool, options);
  fail("architecture '{}' is recognised but has no forward pass yet", arch);
}

}  // namespace tern
