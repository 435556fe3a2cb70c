#include "tern/runtime/engine.h"

#include <chrono>
#include <limits>
#include <thread>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/json.h"
#include "tern/core/memory.h"
#include "tern/core/log.h"
#include "tern/core/units.h"
#include "tern/experts/usage_stats.h"
#include "tern/runtime/memory_plan.h"

namespace tern {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json_if_exists(const fs::path& p) {
  if (!fs::exists(p)) return json::object();
  return parse_json(read_text_file(p), p.string());  // nesting-limited; any JSON error is a tern::Error
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Engine::Engine(const EngineOptions& opt) {
  container_ = std::make_unique<TernModel>(TernModel::open(opt.model));
  const ModelConfig& cfg = container_->config();
  const Manifest& m = container_->manifest();

  context_ = opt.context > 0 ? opt.context : std::min<int64_t>(cfg.max_position_embeddings, 4096);
  if (context_ > cfg.max_position_embeddings)
    fail("--ctx {} exceeds the model's max_position_embeddings {}", context_, cfg.max_position_embeddings);
  prefill_chunk_ = opt.prefill_chunk > 0 ? opt.prefill_chunk : kDefaultPrefillChunk;
  // Every session allocates its KV cache up front: one that cannot fit in
  // memory is refused here, plainly, not by the allocator or the OOM killer.
  {
    const uint64_t kv = kv_cache_bytes(cfg, context_);
    const uint64_t available = available_memory_bytes(), limit = cgroup_memory_limit_bytes();
    const uint64_t usable = limit > 0 && (available == 0 || limit < available) ? limit : available;
    if (usable > 0 && kv > usable)
      fail("the KV cache for a context of {} tokens needs {}, more than the {} of memory available (lower --ctx)",
           context_, format_bytes(kv), format_bytes(usable));
  }

  uint64_t all_experts = 0;
  for (const auto& l : m.expert_layers) all_experts += l.stride * static_cast<uint64_t>(l.num_experts);
  const uint64_t minimum = ExpertCache::minimum_budget(m, cfg.num_experts_per_tok);
  uint64_t budget;
  if (opt.ram_auto) {
    const ModelSummary summary = container_->summary();
    MemoryNeeds needs;
    needs.available = available_memory_bytes();
    needs.cgroup_limit = cgroup_memory_limit_bytes();
    needs.trunk = m.trunk_size;
    needs.kv = kv_cache_bytes(cfg, context_);
    // Activations of one prefill chunk (residual, norms, attention, expert
    // inputs and outputs, logits), with room to spare.
    const auto hidden = static_cast<uint64_t>(std::max(cfg.hidden_size, cfg.num_heads * cfg.head_dim));
    needs.scratch = static_cast<uint64_t>(prefill_chunk_) * 4 *
                        (hidden * (8 + static_cast<uint64_t>(cfg.num_experts_per_tok)) +
                         2 * static_cast<uint64_t>(std::max(cfg.moe_intermediate_size, cfg.intermediate_size))) +
                    8 * static_cast<uint64_t>(cfg.vocab_size);
    needs.all_experts = all_experts;
    needs.min_budget = minimum;
    needs.read_per_token = summary.expert_bytes_per_token;
    const MemoryPlan plan = plan_memory(needs);
    budget = plan.budget;
    memory_plan_ = plan.text;
  } else if (opt.ram_bytes) {
    budget = *opt.ram_bytes;
    if (!m.expert_layers.empty() && budget < minimum)
      fail("--ram {} is below this model's minimum: the top-{} experts of one layer need {} (use --ram {} or more)",
           format_bytes(budget), cfg.num_experts_per_tok, format_bytes(minimum),
           minimum >= (1ull << 20) ? fmt::format("{}M", (minimum + (1ull << 20) - 1) >> 20)
                                   : fmt::format("{}K", (minimum + 1023) >> 10));
  } else {
    budget = std::max(minimum, std::min(all_experts, physical_memory_bytes() / 2));
  }
  if (memory_plan_.empty())
    memory_plan_ = fmt::format("expert cache {} of {} of experts", format_bytes(budget), format_bytes(all_experts));
  if (opt.pin_hot_bytes > 0 && opt.pin_hot_bytes + minimum > budget)
    fail("--pin-hot {} leaves less than the minimum {} of the {} budget for the other experts",
         format_bytes(opt.pin_hot_bytes), format_bytes(minimum), format_bytes(budget));

  ExpertStoreOptions so;
  so.direct_io = opt.direct_io;
  so.verify = opt.verify;
  so.backend = opt.io;
  so.queue_depth = opt.queue_depth > 0 ? opt.queue_depth : kDefaultQueueDepth;
  so.mirrors = opt.mirrors;
  so.faults = opt.io_faults;
  store_ = std::make_unique<ExpertStore>(*container_, so);
  cache_ = std::make_unique<ExpertCache>(*store_, budget, opt.policy);

  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_ = std::make_unique<ThreadPool>(threads);
  ModelOptions mo;
  mo.verify_trunk = opt.verify;
  mo.prefetch_depth = opt.prefetch_depth >= 0 ? opt.prefetch_depth : kDefaultPrefetchDepth;
  mo.prefetch_margin = opt.prefetch_margin;
  model_ = load_model(*container_, *cache_, pool_.get(), mo);

  // Usage counts from earlier runs: seed LFU, pin the hottest (--pin-hot).
  record_usage_ = opt.record_usage;
  std::string why;
  const auto usage = load_expert_usage(container_->dir() / "usage.bin", *container_, &why);
  if (usage) {
    cache_->add_demand_counts(*usage);
  } else if (why.find("absent") == std::string::npos) {
    log(LogLevel::Warn, "ignoring {}", why);
  }
  if (opt.pin_hot_bytes > 0) {
    if (!usage) fail("--pin-hot needs usage counts from earlier runs in {}/usage.bin ({})", container_->dir().string(), why);
    pin_hottest(*cache_, m, *usage, opt.pin_hot_bytes);
  }
  if (opt.preload.value_or(false) && budget < all_experts)
    fail("--preload needs a budget that holds every expert ({})", format_bytes(all_experts));
  if (opt.preload.value_or(budget >= all_experts)) {
    for (const auto& l : m.expert_layers)
      for (int64_t e = 0; e < l.num_experts; ++e) cache_->warm(l, e);
  }

  if (fs::exists(container_->dir() / "tokenizer.json")) {
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(container_->dir() / "tokenizer.json"));
    for (int64_t id = 0; id < cfg.vocab_size; ++id)
      if (!tokenizer_->has_token(static_cast<int32_t>(id))) unusable_tokens_.push_back(static_cast<int32_t>(id));
  }

  // Stop tokens and sampling defaults, as a Hugging Face user would get them.
  json gen = read_json_if_exists(container_->dir() / "generation_config.json");
  auto add_stop = [&](int64_t id) {
    if (id >= 0 && id < cfg.vocab_size && std::find(stop_tokens_.begin(), stop_tokens_.end(), id) == stop_tokens_.end())
      stop_tokens_.push_back(static_cast<int32_t>(id));
  };
  // eos_token_id is one id or a list (GLM-4.5's config.json lists three).
  auto add_stops = [&](const json& file) {
    if (!file.contains("eos_token_id")) return;
    const json& eos = file["eos_token_id"];
    if (eos.is_number_integer()) add_stop(eos.get<int64_t>());
    if (eos.is_array())
      for (const auto& v : eos)
        if (v.is_number_integer()) add_stop(v.get<int64_t>());
  };
  add_stops(gen);
  add_stops(cfg.raw);
  json tok_cfg = read_json_if_exists(container_->dir() / "tokenizer_config.json");
  if (tok_cfg.contains("chat_template") && tok_cfg["chat_template"].is_string())
    hf_chat_template_ = tok_cfg["chat_template"].get<std::string>();
  if (tokenizer_ && tok_cfg.contains("eos_token") && tok_cfg["eos_token"].is_string())
    add_stop(tokenizer_->token_id(tok_cfg["eos_token"].get<std::string>()));
  if (tokenizer_) add_stop(tokenizer_->token_id("<|im_end|>"));

  if (gen.contains("temperature") && gen["temperature"].is_number())
    default_sampling_.temperature = gen["temperature"].get<float>();
  if (gen.contains("top_k") && gen["top_k"].is_number_integer()) default_sampling_.top_k = gen["top_k"].get<int64_t>();
  if (gen.contains("top_p") && gen["top_p"].is_number()) default_sampling_.top_p = gen["top_p"].get<float>();
  if (gen.contains("min_p") && gen["min_p"].is_number()) default_sampling_.min_p = gen["min_p"].get<float>();
  if (gen.contains("repetition_penalty") && gen["repetition_penalty"].is_number())
    default_sampling_.repetition_penalty = gen["repetition_penalty"].get<float>();
  if (gen.contains("do_sample") && gen["do_sample"].is_boolean() && !gen["do_sample"].get<bool>())
    default_sampling_.greedy = true;
}

Engine::~Engine() {
  if (!record_usage_ || !cache_) return;
  try {
    ExpertCounts counts = cache_->demand_counts();
    if (!counts.empty()) save_expert_usage(container_->dir() / "usage.bin", *container_, counts);
  } catch (const Error& e) {
    log(LogLevel::Debug, "usage counts not saved: {}", e.what());  // e.g. a read-only model directory
  }
}

const Tokenizer& Engine::tokenizer() const {
  if (!tokenizer_) fail("{} has no tokenizer.json; pass token ids (--tokens) instead of text", container_->dir().string());
  return *tokenizer_;
}

Session::Session(Engine& engine) : engine_(engine), kv_(engine.model().make_kv_cache(engine.context())) {}

int64_t Session::keep_common_prefix(std::span<const int32_t> tokens) {
  size_t common = 0;
  while (common < tokens_.size() && common < tokens.size() && tokens_[common] == tokens[common]) ++common;
  if (!tokens.empty() && common == tokens.size()) --common;
  if (common < tokens_.size() && kv_.has_rings()) {
    // Step back to the latest checkpoint at or before the divergence; every
    // checkpoint kept describes the current tokens up to its position.
    const KVCache::RingSnapshot* best = nullptr;
    for (const auto& c : checkpoints_)
      if (static_cast<size_t>(c.position) <= common && (!best || c.position > best->position)) best = &c;
    common = best ? static_cast<size_t>(best->position) : 0;
    if (best) kv_.restore_rings(*best);
  }
  std::erase_if(checkpoints_, [&](const KVCache::RingSnapshot& c) { return static_cast<size_t>(c.position) > common; });
  tokens_.resize(common);  // entries of positions < common depend only on tokens < common
  return static_cast<int64_t>(common);
}

void Session::checkpoint() {
  if (!kv_.has_rings()) return;
  if (!checkpoints_.empty() && checkpoints_.back().position == position()) return;
  auto bytes = [](const KVCache::RingSnapshot& c) { return (c.k.size() + c.v.size() + c.state.size()) * sizeof(float); };
  const uint64_t one = (static_cast<uint64_t>(kv_.total_ring_floats()) * (kv_.values_alias_keys() ? 1 : 2) +
                        static_cast<uint64_t>(kv_.total_state_floats())) * sizeof(float);
  uint64_t held = 0;
  for (const auto& c : checkpoints_) held += bytes(c);
  while (!checkpoints_.empty() && (checkpoints_.size() == kMaxCheckpoints || held + one > checkpoint_limit_)) {
    held -= bytes(checkpoints_.front());
    checkpoints_.erase(checkpoints_.begin());
  }
  checkpoints_.push_back(kv_.snapshot_rings(position()));
}

const std::vector<float>& Session::feed(std::span<const int32_t> tokens, bool all_positions, ForwardTrace* trace) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("no tokens to process");
  if (position() + n > engine_.context())
    fail("{} tokens do not fit the context: {} already used of {} (raise --ctx, up to the model's {})", n,
         position(), engine_.context(), engine_.config().max_position_embeddings);
  const int64_t vocab = engine_.config().vocab_size;
  logits_.resize(static_cast<size_t>((all_positions ? n : 1) * vocab));
  ForwardTrace routing_only;
  routing_only.hidden_states = false;
  if (routing_sink_ && !trace) trace = &routing_only;
  const int64_t start = position();
  // The prompt runs in chunks: each chunk reads each of its experts once and
  // applies it to all its tokens. Chunking changes no result (every token's
  // arithmetic is the same in any batch).
  const int64_t chunk = trace ? n : engine_.prefill_chunk();
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t count = std::min(chunk, n - first);
    float* out = logits_.data() + (all_positions ? first * vocab : 0);
    engine_.model().forward(tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(count)), position(), kv_, out,
                            all_positions, trace);
    tokens_.insert(tokens_.end(), tokens.begin() + first, tokens.begin() + first + count);
  }
  if (routing_sink_) routing_sink_(tokens, start, *trace);
  return logits_;
}

void Session::feed_batch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                         const std::function<void(const ForwardTrace&)>& on_step) {
  if (sessions.size() != tokens.size()) fail("feed_batch: {} sessions but {} token lists", sessions.size(), tokens.size());
  if (sessions.empty()) return;
  Engine& engine = sessions[0]->engine_;
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session& s = *sessions[i];
    if (&s.engine_ != &engine) fail("feed_batch: sessions of different engines");
    for (size_t j = 0; j < i; ++j)
      if (sessions[j] == sessions[i]) fail("feed_batch: a session appears twice");
    if (tokens[i].empty()) fail("no tokens to process");
    if (s.position() + static_cast<int64_t>(tokens[i].size()) > engine.context())
      fail("{} tokens do not fit the context: {} already used of {}", tokens[i].size(), s.position(), engine.context());
  }
  const int64_t vocab = engine.config().vocab_size;
  const int64_t chunk = engine.prefill_chunk();
  std::vector<size_t> done(sessions.size(), 0);
  std::vector<SequenceBatch> batch;
  for (;;) {
    batch.clear();
    std::vector<size_t> members;
    for (size_t i = 0; i < sessions.size(); ++i) {
      if (done[i] >= tokens[i].size()) continue;
      Session& s = *sessions[i];
      const size_t count = std::min<size_t>(static_cast<size_t>(chunk), tokens[i].size() - done[i]);
      s.logits_.resize(static_cast<size_t>(vocab));
      batch.push_back({tokens[i].subspan(done[i], count), s.position(), &s.kv_, s.logits_.data(), false});
      members.push_back(i);
    }
    if (batch.empty()) break;
    ForwardTrace trace;
    trace.hidden_states = false;
    engine.model().forward_batch(batch, on_step ? &trace : nullptr);
    if (on_step) on_step(trace);
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = members[b];
      Session& s = *sessions[i];
      s.tokens_.insert(s.tokens_.end(), batch[b].tokens.begin(), batch[b].tokens.end());
      done[i] += batch[b].tokens.size();
    }
  }
}

nlohmann::json GenerationStats::to_json() const {
  json per_step = json::array();
  for (const auto& s : steps)
    per_step.push_back({{"tokens", s.tokens}, {"experts_needed", s.experts_needed}, {"hits", s.hits},
                        {"misses", s.misses}, {"bytes_read", s.bytes_read}, {"read_seconds", s.read_seconds},
                        {"stall_seconds", s.stall_seconds},
                        {"compute_seconds", std::max(0.0, s.total_seconds - s.stall_seconds)}});
  return {{"steps", per_step},{"prompt_tokens", prompt_tokens},
          {"generated_tokens", generated_tokens},
          {"prefill_seconds", prefill_seconds},
          {"decode_seconds", decode_seconds},
          {"time_to_first_token", time_to_first_token},
          {"prefill_tokens_per_second", prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0},
          {"decode_tokens_per_second", decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0},
          {"experts_needed", experts_needed},
          {"cache_lookups", cache_lookups},
          {"cache_hits", cache_hits},
          {"cache_misses", cache_misses},
          {"hit_rate", cache_lookups ? static_cast<double>(cache_hits) / static_cast<double>(cache_lookups) : 0},
          {"bytes_read", bytes_read},
          {"read_seconds", read_seconds},
          {"prefetches", prefetches},
          {"prefetch_recall", prefetch_recall},
          {"recall_cache_hits", recall_cache_hits},
          {"recall_prefetch_hits", recall_prefetch_hits},
          {"prefetch_waste", prefetch_waste},
          {"prediction_recall", prediction_recall},
          {"io_stall_fraction", io_stall_fraction},
          {"io_busy_seconds", io_busy_seconds},
          {"compute_busy_seconds", compute_busy_seconds},
          {"head_seconds", head_seconds},
          {"expert_bytes_per_token", prompt_tokens + generated_tokens > 0
                                         ? static_cast<double>(bytes_read) / static_cast<double>(prompt_tokens + generated_tokens)
                                         : 0.0},
          {"peak_rss", peak_rss},
          {"trunk_bytes", trunk_bytes},
          {"kv_bytes", kv_bytes},
          {"cache_budget", cache_budget}};
}

std::string GenerationStats::summary() const {
  const int64_t total = prompt_tokens + generated_tokens;
  const double decode_tps = decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  const double mib_per_token = total ? static_cast<double>(bytes_read) / (1 << 20) / static_cast<double>(total) : 0;
  return fmt::format(
      "prefill: {} tokens, {:.2f} tok/s | decode: {} tokens, {:.2f} tok/s | time to first token {:.3f}s\n"
      "experts: {} token-expert pairs in {} cache lookups (one per expert per forward step), hit rate {:.1f}% "
      "({} hits, {} misses), read {} ({:.2f} MiB/token); reads in flight {:.2f}s\n"
      "decode: waiting for reads {:.0f}% of the time, recall {:.1f}% ({:.1f}% cache + {:.1f}% prefetch), "
      "lookahead predicted {:.1f}% of the experts one layer ahead, prefetch waste {:.2f} bytes per useful byte\n"
      "memory: peak RSS {} (trunk {}, KV {}, expert cache budget {})",
      prompt_tokens, prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0, generated_tokens, decode_tps,
      time_to_first_token, experts_needed, cache_lookups,
      cache_lookups ? 100.0 * static_cast<double>(cache_hits) / static_cast<double>(cache_lookups) : 0.0,
      cache_hits, cache_misses, format_bytes(bytes_read), mib_per_token, read_seconds, 100 * io_stall_fraction,
      100 * prefetch_recall, 100 * recall_cache_hits, 100 * recall_prefetch_hits, 100 * prediction_recall,
      prefetch_waste, format_bytes(peak_rss),
      format_bytes(trunk_bytes), format_bytes(kv_bytes), format_bytes(cache_budget));
}

std::vector<int32_t> generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<bool(int32_t)>& on_token, GenerationStats* stats) {
  Engine& engine = session.engine();
  const ExpertCacheStats cache0 = engine.cache().stats();
  const uint64_t needed0 = engine.model().counters().experts_needed;
  Sampler sampler(options.sampling);
  std::vector<int32_t> out;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<StepStats> steps;
  // Runs one forward step and records its accounting.
  auto step = [&](std::span<const int32_t> toks) {
    const ExpertCacheStats c0 = engine.cache().stats();
    const uint64_t n0 = engine.model().counters().experts_needed;
    auto s0 = std::chrono::steady_clock::now();
    const std::vector<float>& l = session.feed(toks);
    const ExpertCacheStats c1 = engine.cache().stats();
    steps.push_back({static_cast<int64_t>(toks.size()), engine.model().counters().experts_needed - n0,
                     c1.hits - c0.hits, c1.misses - c0.misses, c1.bytes_read - c0.bytes_read,
                     c1.io_busy_seconds - c0.io_busy_seconds, c1.stall_seconds - c0.stall_seconds, seconds_since(s0)});
    return l;
  };
  std::vector<float> logits = step(prompt);
  if (options.checkpoint_prompt) session.checkpoint();  // a later turn may re-render from here
  const double prefill = seconds_since(t0);
  const ExpertCacheStats decode0 = engine.cache().stats();
  const MoeCounters counters0 = engine.model().counters();
  double decode = 0;
  double ttft = 0;
  auto t1 = std::chrono::steady_clock::now();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  while (static_cast<int64_t>(out.size()) < options.max_new_tokens) {
    for (int32_t id : engine.unusable_tokens()) logits[static_cast<size_t>(id)] = neg_inf;
    int32_t next = sampler.sample(logits, session.tokens());
    out.push_back(next);
    if (out.size() == 1) {
      ttft = seconds_since(t0);
      t1 = std::chrono::steady_clock::now();
    }
    bool stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), next) != options.stop_tokens.end();
    if (on_token && !on_token(next)) stop = true;
    if (stop || static_cast<int64_t>(out.size()) >= options.max_new_tokens) break;
    if (session.position() + 1 > engine.context()) break;  // context full: stop, as llama.cpp does
    logits = step(std::span<const int32_t>(&next, 1));
  }
  if (out.size() > 1) decode = seconds_since(t1);
  if (stats) {
    const ExpertCacheStats c = engine.cache().stats();
    stats->steps = std::move(steps);
    stats->prompt_tokens = static_cast<int64_t>(prompt.size());
    stats->generated_tokens = static_cast<int64_t>(out.size());
    stats->prefill_seconds = prefill;
    stats->decode_seconds = decode;
    stats->time_to_first_token = ttft;
    stats->experts_needed = engine.model().counters().experts_needed - needed0;
    stats->cache_lookups = c.lookups - cache0.lookups;
    stats->cache_hits = c.hits - cache0.hits;
    stats->cache_misses = c.misses - cache0.misses;
    stats->bytes_read = c.bytes_read - cache0.bytes_read;
    stats->read_seconds = c.io_busy_seconds - cache0.io_busy_seconds;
    // Decode-phase streamer figures.
    const uint64_t lookups = c.lookups - decode0.lookups, hits = c.hits - decode0.hits;
    const uint64_t prefetch_hits = c.prefetch_hits - decode0.prefetch_hits;
    auto share = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    stats->prefetches = c.prefetches - cache0.prefetches;
    stats->prefetch_recall = share(static_cast<double>(hits), static_cast<double>(lookups));
    stats->recall_prefetch_hits = share(static_cast<double>(prefetch_hits), static_cast<double>(lookups));
    stats->recall_cache_hits = stats->prefetch_recall - stats->recall_prefetch_hits;
    stats->prefetch_waste = share(static_cast<double>(c.prefetch_wasted_bytes - cache0.prefetch_wasted_bytes),
                                  static_cast<double>(c.prefetch_useful_bytes - cache0.prefetch_useful_bytes));
    const double stall = c.stall_seconds - decode0.stall_seconds;
    stats->io_stall_fraction = share(stall, decode);
    const MoeCounters& mc = engine.model().counters();
    stats->prediction_recall = share(static_cast<double>(mc.predicted_hits - counters0.predicted_hits),
                                     static_cast<double>(mc.predicted_needed - counters0.predicted_needed));
    stats->io_busy_seconds = std::min(decode, c.io_busy_seconds - decode0.io_busy_seconds);
    stats->compute_busy_seconds = std::max(0.0, decode - stall);
    stats->head_seconds = std::min(decode, mc.head_seconds - counters0.head_seconds);
    stats->peak_rss = peak_rss_bytes();
    stats->trunk_bytes = engine.model().resident_bytes();
    stats->kv_bytes = kv_cache_bytes(engine.config(), engine.context());
    stats->cache_budget = engine.cache().budget();
  }
  return out;
}

}  // namespace tern
