#pragma once
// Engine — everything needed to run one installed model: the container, the
// expert store and cache (bounded by --ram), the thread pool, the model's
// forward pass and its tokenizer. Session holds one conversation's KV cache
// and tokens; generate() runs prefill + decode with sampling and stop tokens.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/core/thread_pool.h"
#include "tern/experts/expert_cache.h"
#include "tern/format/tern_model.h"
#include "tern/models/model.h"
#include "tern/runtime/sampler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

struct EngineOptions {
  std::filesystem::path model;
  std::optional<uint64_t> ram_bytes;  // expert cache budget; default: all experts, at most half of RAM
  int threads = 0;                    // 0 = all cores
  bool verify = true;                 // checksum trunk at load and each expert read
  bool direct_io = true;
  int64_t context = 0;  // 0 = min(max_position_embeddings, 4096)
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);

  const TernModel& container() const { return *container_; }
  const ModelConfig& config() const { return container_->config(); }
  Model& model() { return *model_; }
  ExpertCache& cache() { return *cache_; }
  const Tokenizer& tokenizer() const;
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  ThreadPool& pool() { return *pool_; }
  int64_t context() const { return context_; }
  // Token ids that end generation (eos from generation_config.json / tokenizer_config.json).
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }
  // Sampling defaults from generation_config.json where present.
  SamplerOptions default_sampling() const { return default_sampling_; }
  // Ids in the model's vocabulary that the tokenizer cannot decode (padding
  // rows of the embedding); generation never samples them.
  const std::vector<int32_t>& unusable_tokens() const { return unusable_tokens_; }

 private:
  std::unique_ptr<TernModel> container_;
  std::unique_ptr<ExpertStore> store_;
  std::unique_ptr<ExpertCache> cache_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int64_t context_ = 0;
  std::vector<int32_t> stop_tokens_;
  std::vector<int32_t> unusable_tokens_;
  SamplerOptions default_sampling_;
};

// I/O and time of one forward step (the prefill batch, or one decoded token).
struct StepStats {
  int64_t tokens = 0;
  uint64_t experts_needed = 0, hits = 0, misses = 0, bytes_read = 0;
  double read_seconds = 0, total_seconds = 0;
};

// Timings and I/O of one generate() call.
struct GenerationStats {
  std::vector<StepStats> steps;  // [0] = prefill, then one per decoded token
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double time_to_first_token = 0;
  uint64_t experts_needed = 0;  // token-expert pairs
  uint64_t cache_lookups = 0, cache_hits = 0, cache_misses = 0;
  uint64_t bytes_read = 0;
  double read_seconds = 0;
  uint64_t peak_rss = 0;
  uint64_t trunk_bytes = 0, kv_bytes = 0, cache_budget = 0;
  nlohmann::json to_json() const;
  std::string summary() const;
};

class Session {
 public:
  explicit Session(Engine& engine);
  Engine& engine() { return engine_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t position() const { return static_cast<int64_t>(tokens_.size()); }
  void reset() { tokens_.clear(); }
  // Prepares the session to continue with `tokens`, a whole re-rendered
  // conversation: keeps the longest common prefix of tokens() and `tokens`
  // whose KV entries are still valid, drops the rest, and returns its length
  // (the caller feeds tokens[length..]). At most tokens.size() - 1 are kept,
  // so there is always a token to feed. A model with sliding-window layers
  // keeps nothing unless `tokens` extends tokens(): its KV ring has already
  // overwritten the window that stepping back would need.
  int64_t keep_common_prefix(std::span<const int32_t> tokens);

  // Appends tokens and runs them; returns the logits of the last token
  // (or of every new token if all_positions: [n, vocab]).
  const std::vector<float>& feed(std::span<const int32_t> tokens, bool all_positions = false,
                                 ForwardTrace* trace = nullptr);

 private:
  Engine& engine_;
  KVCache kv_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplerOptions sampling;
  std::vector<int32_t> stop_tokens;  // in addition to none: caller passes engine.stop_tokens() to use them
};

// Prefills `prompt` into the session (after what it holds), then samples up
// to max_new_tokens, calling on_token for each (return false to stop).
// Throws a clear error if the prompt does not fit the context.
std::vector<int32_t> generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<bool(int32_t)>& on_token, GenerationStats* stats);

}  // namespace tern
