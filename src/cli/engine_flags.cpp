#include "cli/engine_flags.h"

#include <charconv>

#include "tern/core/error.h"
#include "tern/core/units.h"

namespace tern::cli {

void EngineFlags::add(CLI::App* cmd) {
  cmd->add_option("model", model, ".tern model directory (made by `tern install`)")->required();
  cmd->add_option("--ram", ram,
                  "Expert cache budget, e.g. 512M, 4G, or auto (plan from available memory and the cgroup limit); "
                  "default: all experts, at most half of RAM");
  cmd->add_option("--threads", threads, "Compute threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", ctx, "Context length in tokens (default: min(model max, 4096))")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-verify", no_verify, "Skip checksums of trunk and experts on read (benchmarks)");
  cmd->add_flag("--buffered-io", buffered_io, "Read experts through the page cache instead of O_DIRECT");
  cmd->add_flag("--stats", stats, "Print speed, cache and memory statistics to stderr");
  cmd->add_option("--io", io, "Expert reads: uring (default), pread (thread pool), mmap (baseline)");
  cmd->add_option("--queue-depth", queue_depth, "Expert reads in flight (default 8)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--mirror", mirrors, "A replica of the model's experts.bin on another disk (repeatable)");
  cmd->add_option("--policy", policy, "Expert cache eviction: lru (default), lfu, lookahead");
  cmd->add_option("--prefetch", prefetch, "MoE layers whose experts are predicted and read ahead (0 = off; default 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefetch-margin", prefetch_margin, "Experts beyond top-k read ahead per token and layer")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--pin-hot", pin_hot, "Keep the most used experts (from usage.bin) resident, up to SIZE");
  cmd->add_option("--prefill-chunk", prefill_chunk, "Prompt tokens per forward step (default 256)")
      ->check(CLI::NonNegativeNumber);
  auto* pre = cmd->add_flag("--preload", preload,
                            "Read every expert at start (the budget must hold them all; the default when it does)");
  cmd->add_flag("--no-preload", no_preload, "Read experts only when first needed, even when the budget holds them all")
      ->excludes(pre);
  cmd->add_flag("--no-usage", no_usage, "Do not update usage.bin beside the model");
}

EngineOptions EngineFlags::options() const {
  EngineOptions o;
  o.model = model;
  if (ram == "auto") o.ram_auto = true;
  else if (!ram.empty()) o.ram_bytes = parse_size(ram);
  o.io = parse_io_backend(io);
  o.queue_depth = queue_depth;
  for (const auto& m : mirrors) o.mirrors.emplace_back(m);
  o.policy = parse_cache_policy(policy);
  o.prefetch_depth = prefetch;
  o.prefetch_margin = prefetch_margin;
  if (!pin_hot.empty()) o.pin_hot_bytes = parse_size(pin_hot);
  o.prefill_chunk = prefill_chunk;
  if (preload) o.preload = true;
  if (no_preload) o.preload = false;
  o.record_usage = !no_usage;
  o.threads = threads;
  o.context = ctx;
  o.verify = !no_verify;
  o.direct_io = !buffered_io;
  return o;
}

void SamplingFlags::add(CLI::App* cmd) {
  cmd->add_option("--temperature", temperature, "Sampling temperature (0 = greedy)");
  cmd->add_option("--top-k", top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", top_p, "Nucleus sampling mass (1 = off)");
  cmd->add_option("--min-p", min_p, "Drop tokens below min-p x the top probability");
  cmd->add_option("--repetition-penalty", repetition_penalty, "Penalty for tokens already in the context (1 = off)");
  cmd->add_option("--seed", seed, "Random seed")->default_val(0);
  cmd->add_flag("--greedy", greedy, "Always take the most likely token");
}

SamplerOptions SamplingFlags::options(const SamplerOptions& defaults) const {
  SamplerOptions o = defaults;
  if (temperature) o.temperature = *temperature;
  if (top_k) o.top_k = *top_k;
  if (top_p) o.top_p = *top_p;
  if (min_p) o.min_p = *min_p;
  if (repetition_penalty) o.repetition_penalty = *repetition_penalty;
  o.seed = seed;
  if (greedy) o.greedy = true;
  return o;
}

void PromptFlags::add(CLI::App* cmd) {
  auto* p = cmd->add_option("-p,--prompt", prompt, "Prompt text");
  auto* t = cmd->add_option("--tokens", tokens, "Prompt as token ids, e.g. 1,2,3");
  p->excludes(t);
  t->excludes(p);
}

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int32_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < 0)
      fail("invalid token id '{}' in --tokens (expected comma-separated non-negative integers)", item);
    ids.push_back(v);
    i = j + 1;
  }
  return ids;
}

std::vector<int32_t> PromptFlags::ids(const Engine& engine) const {
  std::vector<int32_t> ids;
  if (!tokens.empty()) {
    ids = parse_token_list(tokens);
  } else if (!prompt.empty()) {
    // A raw prompt starts as the tokenizer's post-processor starts it
    // (Mixtral's <s>), as Hugging Face's tokenizer(text) and llama.cpp do.
    EncodeOptions options;
    options.add_bos = engine.tokenizer().post_processor_adds_bos();
    ids = engine.tokenizer().encode(prompt, options);
  } else {
    fail("give a prompt with --prompt TEXT or --tokens 1,2,3");
  }
  if (ids.empty()) fail("the prompt encodes to no tokens");
  for (int32_t id : ids)
    if (id >= engine.config().vocab_size)
      fail("token id {} is outside the vocabulary (size {})", id, engine.config().vocab_size);
  return ids;
}

}  // namespace tern::cli
