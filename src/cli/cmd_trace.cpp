// tern trace record MODEL (--prompt TEXT | --tokens 1,2,3) [-n N] -o FILE: a
// generate run that writes its routing trace (docs/TRACES.md).
// tern trace replay TRACE (--capacity N | --ram SIZE) [--policy lru,...]
// [--json]: hit rates of cache policies and Belady's optimum on a trace.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/core/error.h"
#include "tern/core/units.h"
#include "tern/experts/policy_sim.h"
#include "tern/experts/routing_trace.h"
#include "tern/format/tern_model.h"
#include "tern/runtime/trace_recorder.h"

namespace tern::cli {

namespace {

struct RecordFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  PromptFlags prompt;
  int64_t n = 128;
  bool ignore_eos = false;
  std::string output;
};

void add_record(CLI::App& trace) {
  auto* cmd = trace.add_subcommand(
      "record", "Generate from a prompt and write the routing of every token run");
  auto f = std::make_shared<RecordFlags>();
  f->engine.add(cmd);
  f->prompt.add(cmd);
  f->sampling.add(cmd);
  cmd->add_option("-n,--max-tokens", f->n, "Maximum new tokens")
      ->default_val(128)
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_option("-o,--output", f->output, "The trace file (JSON Lines, one line per token)")
      ->required();
  cmd->callback([f] {
    Engine engine(f->engine.options());
    Session session(engine);
    const std::vector<int32_t> prompt = f->prompt.ids(engine);
    GenerateOptions g;
    g.max_new_tokens = f->n;
    g.sampling = f->sampling.options(engine.default_sampling());
    if (!f->ignore_eos) g.stop_tokens = engine.stop_tokens();
    TraceRecorder recorder(f->output);
    recorder.attach(session);
    GenerationStats stats;
    const std::vector<int32_t> out = generate(session, prompt, g, nullptr, &stats);
    recorder.close();
    fmt::print(
        stderr, "{}: {} lines ({} prompt tokens, {} of {} generated; the last one is not run)\n",
        f->output, recorder.lines(), prompt.size(), out.empty() ? 0 : out.size() - 1, out.size());
    if (f->engine.stats) fmt::print(stderr, "{}\n", stats.summary());
  });
}

struct ReplayFlags {
  std::string trace;
  std::optional<int64_t> capacity;
  std::string ram;
  std::string model;
  std::optional<uint64_t> record_bytes;
  std::vector<std::string> policies;
  bool json = false;
};

// The trace against the model it claims to come from: layer count, ids in range.
void check_trace_fits(const RoutingTrace& trace, const Manifest& manifest,
                      const std::string& model) {
  const auto layers = static_cast<int64_t>(manifest.expert_layers.size());
  if (trace.layers != layers)
    fail("the trace lists {} MoE layers per token; {} has {}", trace.layers, model, layers);
  for (int64_t t = 0; t < trace.tokens(); ++t)
    for (int64_t l = 0; l < layers; ++l)
      for (int32_t e : trace.batch(t, l))
        if (e >= manifest.expert_layers[static_cast<size_t>(l)].num_experts)
          fail("trace line {}: expert {} in MoE layer {}, but {} has {} experts there", t + 1, e, l,
               model, manifest.expert_layers[static_cast<size_t>(l)].num_experts);
}

void add_replay(CLI::App& trace) {
  auto* cmd = trace.add_subcommand(
      "replay", "Hit rates of cache policies and Belady's optimum on a routing trace");
  auto f = std::make_shared<ReplayFlags>();
  cmd->add_option("trace", f->trace,
                  "Trace file (JSON Lines: {\"experts\": [[...], ...]} per token)")
      ->required();
  auto* cap = cmd->add_option("--capacity", f->capacity, "Cache size in experts, across all layers")
                  ->check(CLI::PositiveNumber);
  auto* ram = cmd->add_option("--ram", f->ram,
                              "Cache size in bytes (512M, 4G): capacity = SIZE / bytes per expert "
                              "(--model or --record-bytes)");
  cap->excludes(ram);
  ram->excludes(cap);
  cmd->add_option(
      "--model", f->model,
      ".tern model the trace comes from: checks layers and ids; --ram uses its expert size "
      "(the widest layer's 4 KiB-rounded record, as the cache allocates)");
  cmd->add_option("--record-bytes", f->record_bytes,
                  "Bytes per cached expert, for --ram without --model")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--policy", f->policies,
                  "Policies to run, comma-separated (default: all): "
                  "lru, lfu, fifo, lookahead-oracle, belady")
      ->delimiter(',');
  cmd->add_flag("--json", f->json,
                "Print {\"policies\": {name: {\"hit_rate\", \"hits\", \"misses\"}}, \"accesses\", "
                "\"capacity\"}");
  cmd->callback([f] {
    if (!f->capacity && f->ram.empty())
      fail("give the cache size: --capacity N (experts) or --ram SIZE");
    if (!f->model.empty() && f->record_bytes)
      fail("--record-bytes and --model both give the expert size; use one");
    std::vector<ReplayPolicy> policies;
    for (const std::string& name : f->policies) {
      const ReplayPolicy p = parse_replay_policy(name);
      if (std::find(policies.begin(), policies.end(), p) == policies.end()) policies.push_back(p);
    }
    if (policies.empty()) policies = all_replay_policies();

    std::optional<TernModel> model;
    if (!f->model.empty()) model.emplace(TernModel::open(f->model));
    uint64_t record_bytes = f->record_bytes.value_or(0);
    if (model)
      for (const ExpertLayer& l : model->manifest().expert_layers)
        record_bytes = std::max(record_bytes, l.stride);
    int64_t capacity = f->capacity.value_or(0);
    if (!f->ram.empty()) {
      if (record_bytes == 0)
        fail("--ram needs the bytes per expert: --model MODEL.tern or --record-bytes N");
      capacity =
          static_cast<int64_t>(std::min<uint64_t>(parse_size(f->ram) / record_bytes, INT64_MAX));
      if (capacity == 0) fail("--ram {} holds no expert of {}", f->ram, format_bytes(record_bytes));
    }

    const auto t0 = std::chrono::steady_clock::now();
    const RoutingTrace trace = read_routing_trace(f->trace);
    if (model) check_trace_fits(trace, model->manifest(), f->model);
    const ReplayAccesses accesses = prepare_replay(trace);
    const double read_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    nlohmann::ordered_json results = nlohmann::ordered_json::object();
    std::string table;
    for (ReplayPolicy p : policies) {
      const auto s0 = std::chrono::steady_clock::now();
      const ReplayResult r = replay(accesses, p, ReplayOptions{capacity});
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      results[std::string(replay_policy_name(p))] = {
          {"hit_rate", r.hit_rate()}, {"hits", r.hits}, {"misses", r.misses}};
      table += fmt::format("{:<18} {:>8.2f}% {:>12} {:>12} {:>8.2f}s\n", replay_policy_name(p),
                           100 * r.hit_rate(), r.hits, r.misses, seconds);
    }
    if (f->json) {
      const nlohmann::ordered_json out = {
          {"policies", results}, {"accesses", accesses.accesses()}, {"capacity", capacity}};
      fmt::print("{}\n", out.dump());
      return;
    }
    fmt::print(
        "{}: {} tokens x {} MoE layers, {} expert demands, {} distinct experts (read in {:.2f}s)\n",
        f->trace, trace.tokens(), trace.layers, accesses.accesses(), accesses.distinct,
        read_seconds);
    fmt::print("capacity: {} experts{}\n", capacity,
               f->ram.empty() ? std::string()
                              : fmt::format(" (--ram {} / {} per expert)", f->ram,
                                            format_bytes(record_bytes)));
    fmt::print("{:<18} {:>9} {:>12} {:>12} {:>9}\n{}", "policy", "hit rate", "hits", "misses",
               "time", table);
  });
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace", "Routing traces: record one from a run, replay one through cache policies");
  cmd->require_subcommand(1);
  add_record(*cmd);
  add_replay(*cmd);
}

}  // namespace tern::cli
