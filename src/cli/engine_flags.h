#pragma once
// Flags shared by the commands that run a model (generate, logits, chat):
// placement (--ram, --threads, --ctx, I/O), sampling, and the prompt.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tern/runtime/engine.h"

namespace tern::cli {

struct EngineFlags {
  std::string model;
  std::string ram;
  int threads = 0;
  int64_t ctx = 0;
  bool no_verify = false;
  bool buffered_io = false;
  bool stats = false;
  std::string io = "uring";
  int queue_depth = 0;
  std::vector<std::string> mirrors;
  std::string policy = "lru";
  int prefetch = -1;
  int64_t prefetch_margin = 0;
  std::string pin_hot;
  int64_t prefill_chunk = 0;
  bool preload = false, no_preload = false;
  bool no_usage = false;

  void add(CLI::App* cmd);
  EngineOptions options() const;
};

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  uint64_t seed = 0;
  bool greedy = false;

  void add(CLI::App* cmd);
  SamplerOptions options(const SamplerOptions& defaults) const;
};

struct PromptFlags {
  std::string prompt;
  std::string tokens;

  void add(CLI::App* cmd);  // presence is checked by ids()
  bool has_text() const { return !prompt.empty(); }
  // The prompt's token ids (text is encoded with special tokens allowed).
  std::vector<int32_t> ids(const Engine& engine) const;
};

std::vector<int32_t> parse_token_list(const std::string& text);

}  // namespace tern::cli
