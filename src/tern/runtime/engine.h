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
#include "tern/experts/expert_io.h"
#include "tern/format/tern_model.h"
#include "tern/models/model.h"
#include "tern/runtime/sampler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

struct EngineOptions {
  std::filesystem::path model;
  std::optional<uint64_t> ram_bytes;  // expert cache budget; default: all experts, at most half of RAM
  bool ram_auto = false;              // --ram auto: the memory planner decides (runtime/memory_plan.h)
  int threads = 0;                    // 0 = all cores
  bool verify = true;                 // checksum trunk at load and each expert read
  bool direct_io = true;
  int64_t context = 0;  // 0 = min(max_position_embeddings, 4096)
  // The streamer (docs/DESIGN.md "Experts"); none of these changes results.
  IoBackend io = IoBackend::Uring;
  int queue_depth = 0;  // reads in flight; 0 = kDefaultQueueDepth
  std::vector<std::filesystem::path> mirrors;
  CachePolicy policy = CachePolicy::Lru;
  int prefetch_depth = -1;      // MoE layers predicted ahead; -1 = kDefaultPrefetchDepth, 0 = off
  int64_t prefetch_margin = 0;  // experts beyond top-k per token and layer
  uint64_t pin_hot_bytes = 0;   // experts pinned from usage.bin at start-up
  bool record_usage = true;     // update usage.bin beside the model at exit (when writable)
  int64_t prefill_chunk = 0;    // prompt tokens per forward step; 0 = kDefaultPrefillChunk
  // Read every expert at start, in the background at prefetch priority, so
  // decode never misses: nullopt (default) when the budget holds every
  // expert; true requires that it does; false never.
  std::optional<bool> preload;
  std::string io_faults;        // tests only: ExpertStoreOptions::faults
};

// Defaults chosen by measurement (docs/RESULTS.md).
inline constexpr int kDefaultQueueDepth = 8;
inline constexpr int kDefaultPrefetchDepth = 1;
inline constexpr int64_t kDefaultPrefillChunk = 256;

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
  int64_t prefill_chunk() const { return prefill_chunk_; }
  // The memory plan (--ram auto) or a line describing the budget chosen.
  const std::string& memory_plan() const { return memory_plan_; }
  ExpertStore& store() { return *store_; }
  ~Engine();
  // Token ids that end generation (eos from generation_config.json / tokenizer_config.json).
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }
  // The model's own Jinja chat template (tokenizer_config.json's
  // chat_template; "" when absent). Tern renders chats itself; the text
  // only tells variants of a family apart (make_chat_format).
  const std::string& hf_chat_template() const { return hf_chat_template_; }
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
  int64_t prefill_chunk_ = kDefaultPrefillChunk;
  std::string memory_plan_;
  bool record_usage_ = false;
  std::vector<int32_t> stop_tokens_;
  std::vector<int32_t> unusable_tokens_;
  std::string hf_chat_template_;
  SamplerOptions default_sampling_;
};

// I/O and time of one forward step (the prefill batch, or one decoded token).
struct StepStats {
  int64_t tokens = 0;
  uint64_t experts_needed = 0, hits = 0, misses = 0, bytes_read = 0;
  double read_seconds = 0;   // wall time with at least one expert read in flight
  double stall_seconds = 0;  // time compute waited for reads
  double total_seconds = 0;
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
  double read_seconds = 0;  // wall time with at least one expert read in flight (prefill + decode)
  // The streamer, over decode steps: needed experts found resident or in
  // flight (recall), split into cache hits and prefetch hits; prefetched but
  // unused bytes per useful prefetched byte; decode time spent waiting for
  // reads; decode wall time with a read in flight / with compute running.
  double prefetch_recall = 0;
  double recall_cache_hits = 0, recall_prefetch_hits = 0;
  double prefetch_waste = 0;
  double io_stall_fraction = 0;
  double io_busy_seconds = 0, compute_busy_seconds = 0;
  double head_seconds = 0;  // decode time in the output head (MoeCounters::head_seconds)
  uint64_t prefetches = 0;
  // Decode: of the experts layers needed, the share the lookahead had
  // predicted one layer ahead (whether or not the read was made in time).
  double prediction_recall = 0;
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
  void reset() {
    tokens_.clear();
    checkpoints_.clear();
  }
  // Prepares the session to continue with `tokens`, a whole re-rendered
  // conversation: keeps the longest common prefix of tokens() and `tokens`
  // whose KV entries are still valid, drops the rest, and returns its length
  // (the caller feeds tokens[length..]). At most tokens.size() - 1 are kept,
  // so there is always a token to feed. A model with sliding-window layers
  // can step back only to a checkpoint (below): its KV rings have
  // overwritten the window that stepping back further would need.
  int64_t keep_common_prefix(std::span<const int32_t> tokens);
  // Remembers the sliding-window rings at the current position, so a later
  // keep_common_prefix can step back to it (generate() calls this after the
  // prompt with GenerateOptions::checkpoint_prompt: a chat's next turn
  // re-renders the conversation from there, with the reply's reasoning
  // dropped). A no-op for a model without rings; the last kMaxCheckpoints
  // are kept (a few MiB each for gpt-oss), fewer when together they would
  // pass the byte limit: older ones are dropped first, before the new copy
  // is made, so checkpoints hold at most max(limit, one checkpoint)
  // (Gemma 4 26B-A4B: one of 400 MiB).
  void checkpoint();
  static constexpr size_t kMaxCheckpoints = 4;
  static constexpr uint64_t kCheckpointBytes = 256ull << 20;  // the default limit
  void set_checkpoint_limit(uint64_t bytes) { checkpoint_limit_ = bytes; }
  size_t checkpoint_count() const { return checkpoints_.size(); }

  // Appends tokens and runs them; returns the logits of the last token
  // (or of every new token if all_positions: [n, vocab]).
  const std::vector<float>& feed(std::span<const int32_t> tokens, bool all_positions = false,
                                 ForwardTrace* trace = nullptr);
  // The logits of the last token fed.
  const std::vector<float>& logits() const { return logits_; }
  const KVCache& kv() const { return kv_; }

  // Feeds several sessions of one engine in one forward batch (the server's
  // requests decode together, so each expert read serves all of them).
  // tokens[i] goes to sessions[i]; long inputs run in prefill-chunk steps.
  // Each session ends with the same logits, bit for bit, as if fed alone.
  // With a trace, each forward step's routing (batch rows in session order)
  // is reported to on_step after the step (the server's live expert feed).
  static void feed_batch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                         const std::function<void(const ForwardTrace&)>& on_step = {});

  // Called after every feed with the tokens it ran, the position of the
  // first and their routing (no hidden states), e.g. to record a routing
  // trace (runtime/trace_recorder.h). Traced feeds run as one batch.
  using RoutingSink =
      std::function<void(std::span<const int32_t> tokens, int64_t first_position, const ForwardTrace& trace)>;
  void set_routing_sink(RoutingSink sink) { routing_sink_ = std::move(sink); }

  // A kept conversation across restarts (`tern serve --kv-dir`,
  // runtime/session_file.cpp): save() writes the tokens, the KV entries in
  // use and the ring checkpoints to `path` atomically (a temporary file,
  // fsync, rename) with an xxh3 checksum and `fingerprint` (the model and
  // context it belongs to, fingerprint() below). load() restores exactly
  // that state or throws tern::Error naming what is wrong (truncated,
  // corrupt, another model or context) and leaves the session empty.
  void save(const std::filesystem::path& path, uint64_t fingerprint) const;
  void load(const std::filesystem::path& path, uint64_t fingerprint);
  // The model (its manifest) and KV geometry (context) a saved session is for.
  static uint64_t fingerprint(const Engine& engine);

 private:
  Engine& engine_;
  KVCache kv_;
  std::vector<int32_t> tokens_;
  std::vector<KVCache::RingSnapshot> checkpoints_;  // oldest first
  uint64_t checkpoint_limit_ = kCheckpointBytes;
  std::vector<float> logits_;
  RoutingSink routing_sink_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplerOptions sampling;
  std::vector<int32_t> stop_tokens;  // in addition to none: caller passes engine.stop_tokens() to use them
  // Remember the sliding-window rings after the prompt (Session::checkpoint)
  // so a later turn that re-renders the conversation can step back to it.
  // A chat turn wants it; a one-shot generation does not (a checkpoint of
  // Gemma 4 26B-A4B's rings is 400 MiB).
  bool checkpoint_prompt = false;
};

// Prefills `prompt` into the session (after what it holds), then samples up
// to max_new_tokens, calling on_token for each (return false to stop).
// Throws a clear error if the prompt does not fit the context.
std::vector<int32_t> generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<bool(int32_t)>& on_token, GenerationStats* stats);

}  // namespace tern
