// Fuzz target "container": the input is an installed model's manifest.json,
// beside the trunk.bin and experts.bin of a small committed model of its
// architecture (fuzz/data/container/<architecture>/, made by
// fuzz/make_seeds.sh; picked by the first architecture name the input
// mentions, qwen3_moe if none). TernModel::open must either refuse it with a
// clean tern::Error or accept a manifest the engine can run: the model is
// then loaded and fed tokens, so a manifest whose config and tensor table
// disagree (issue 16: `head_dim` deleted from the config -> heap
// corruption) shows up as a crash. Checksums are off because an attacker can
// recompute them: memory safety must not rest on them.
#include <algorithm>
#include <vector>

#include "fuzz_target.h"
#include "tern/format/tern_model.h"
#include "tern/runtime/engine.h"

#ifndef TERN_FUZZ_DATA_DIR
#error "TERN_FUZZ_DATA_DIR must name fuzz/data"
#endif

namespace tern::fuzz {

namespace fs = std::filesystem;

namespace {

constexpr const char* kArchitectures[] = {"qwen3_moe", "gpt_oss", "qwen3_next"};  // the first is the default

// The model directory of an architecture: the fixture's data files, and
// manifest.json per input.
fs::path model_dir(std::string_view input) {
  const char* arch = kArchitectures[0];
  for (const char* a : kArchitectures)
    if (input.find(std::string("\"") + a + "\"") != std::string_view::npos) {
      arch = a;
      break;
    }
  fs::path d = scratch_dir() / "container" / arch;
  if (!fs::exists(d / "experts.bin")) {
    fs::create_directories(d);
    for (const char* name : {"trunk.bin", "experts.bin"})
      fs::copy_file(fs::path(TERN_FUZZ_DATA_DIR) / "container" / arch / name, d / name,
                    fs::copy_options::overwrite_existing);
  }
  return d;
}

void run_model(const TernModel& container) {
  EngineOptions opt;
  opt.model = container.dir();
  opt.threads = 1;
  opt.verify = false;
  opt.direct_io = false;
  opt.record_usage = false;  // no usage.bin beside the fixture: one input must not change the next one's run
  opt.context = std::min<int64_t>(4, container.config().max_position_embeddings);
  Engine engine(opt);
  Session session(engine);
  const auto vocab = static_cast<int32_t>(engine.config().vocab_size);
  const std::vector<int32_t> prompt = {0, vocab - 1};
  const std::vector<float>& logits = session.feed(prompt);
  if (logits.size() != static_cast<size_t>(vocab)) broken("logits size differs from the vocabulary");
  const std::vector<int32_t> next = {vocab / 2};
  session.feed(next, /*all_positions=*/true);
}

}  // namespace

void fuzz_container(std::span<const uint8_t> input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  const fs::path dir = model_dir(text);
  write_file(dir / "manifest.json", text);
  run_expecting_clean_errors([&] {
    TernModel container = TernModel::open(dir);
    container.summary();
    container.verify();
    run_model(container);
  });
}

}  // namespace tern::fuzz
