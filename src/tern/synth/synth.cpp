#include "tern/synth/synth.h"

#include <unistd.h>

#include <algorithm>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/progress.h"
#include "tern/format/architectures.h"
#include "tern/format/safetensors.h"
#include "tern/synth/presets.h"
#include "tern/synth/random_weights.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct TokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;  // may be empty: then none is written
};

// The built-in small BPE, or a real tokenizer.json the user points to (with
// the tokenizer_config.json beside it, if any).
TokenizerFiles tokenizer_files(const SynthOptions& opt) {
  TokenizerFiles files;
  if (opt.tokenizer.empty()) {
    auto built = build_synthetic_tokenizer();
    files.tokenizer_json = std::move(built.tokenizer_json);
    files.tokenizer_config_json = std::move(built.tokenizer_config_json);
    return files;
  }
  fs::path path = fs::is_directory(opt.tokenizer) ? opt.tokenizer / "tokenizer.json" : opt.tokenizer;
  files.tokenizer_json = read_text_file(path);
  fs::path config = path.parent_path() / "tokenizer_config.json";
  if (fs::exists(config)) files.tokenizer_config_json = read_text_file(config);
  return files;
}

int32_t id_or(const Tokenizer& tok, std::string_view piece, int32_t fallback) {
  int32_t id = tok.token_id(piece);
  return id >= 0 ? id : fallback;
}

struct TempDir {
  fs::path path;
  bool committed = false;
  ~TempDir() {
    std::error_code ec;
    if (!committed) fs::remove_all(path, ec);
  }
};

}  // namespace

std::vector<std::string> synth_presets(const std::string& architecture) {
  std::vector<std::string> names;
  for (const auto& p : all_synth_presets())
    if (p.architecture == architecture) names.push_back(p.name);
  return names;
}

json synth_config(const SynthOptions& opt, int64_t tokenizer_vocab_size) {
  find_arch(opt.architecture);  // clear error for unknown architectures first
  const SynthPreset& preset = find_synth_preset(opt.architecture, opt.preset);
  json config = preset.config;
  // Presets without a vocab_size follow the tokenizer exactly, so every id
  // the model can emit decodes (real checkpoints pad; the engine masks those).
  if (!config.contains("vocab_size")) config["vocab_size"] = tokenizer_vocab_size;
  for (auto it = opt.overrides.begin(); it != opt.overrides.end(); ++it) config[it.key()] = it.value();
  config["torch_dtype"] = opt.dtype == DType::F32 ? "float32" : opt.dtype == DType::F16 ? "float16" : "bfloat16";
  parse_model_config(config, "synthesized config.json");  // validates
  if (config["vocab_size"].get<int64_t>() < tokenizer_vocab_size)
    fail("vocab_size {} is smaller than the tokenizer's {} tokens", config["vocab_size"].get<int64_t>(),
         tokenizer_vocab_size);
  return config;
}

SynthResult synthesize_model(const SynthOptions& opt) {
  if (opt.dtype != DType::F32 && opt.dtype != DType::BF16 && opt.dtype != DType::F16)
    fail("synth writes f32, bf16 or f16 weights, not {}", dtype_name(opt.dtype));
  if (opt.output.empty()) fail("no output directory given");
  fs::path output = fs::absolute(opt.output).lexically_normal();
  if (output.filename().empty()) output = output.parent_path();
  if (fs::exists(output) && !opt.force)
    fail("{} already exists; pass --force to replace it", output.string());
  if (!fs::is_directory(output.parent_path()))
    fail("{}: parent directory does not exist", output.parent_path().string());

  TempDir tmp{output.parent_path() / fmt::format(".{}.synth-{}", output.filename().string(), ::getpid())};
  fs::remove_all(tmp.path);
  fs::create_directory(tmp.path);

  // Tokenizer first: the vocabulary size follows it.
  TokenizerFiles tok_files = tokenizer_files(opt);
  write_file_atomic(tmp.path / "tokenizer.json", tok_files.tokenizer_json);
  if (!tok_files.tokenizer_config_json.empty())
    write_file_atomic(tmp.path / "tokenizer_config.json", tok_files.tokenizer_config_json);
  Tokenizer tok = Tokenizer::load(tmp.path / "tokenizer.json");

  json config = synth_config(opt, tok.vocab_size());
  const int32_t eos = id_or(tok, "<|im_end|>", id_or(tok, "<|endoftext|>", 0));
  const int32_t bos = id_or(tok, "<|endoftext|>", eos);
  config["bos_token_id"] = bos;
  config["eos_token_id"] = eos;
  ModelConfig cfg = parse_model_config(config, "synthesized config.json");
  std::vector<TensorDecl> decls = find_arch(cfg.architecture).tensors(cfg);

  // Assign tensors to shards of at most shard_bytes (a tensor never splits).
  std::vector<std::vector<TensorSpec>> shards(1);
  std::vector<const TensorDecl*> order;
  uint64_t shard_used = 0, total = 0;
  for (const auto& d : decls) {
    TensorSpec spec{d.name, opt.dtype, d.shape};
    uint64_t n = spec.nbytes();
    if (shard_used > 0 && shard_used + n > opt.shard_bytes) {
      shards.emplace_back();
      shard_used = 0;
    }
    shards.back().push_back(spec);
    shard_used += n;
    total += n;
    order.push_back(&d);
  }

  Progress progress("synth", total, opt.quiet);
  json weight_map = json::object();
  std::vector<char> buf;
  size_t next_decl = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string name = shards.size() == 1
                           ? "model.safetensors"
                           : fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards.size());
    SafetensorsWriter writer(tmp.path / name, shards[s]);
    for (const TensorSpec& spec : shards[s]) {
      const TensorDecl& d = *order[next_decl++];
      WeightStream stream(opt.seed, d.name, d.init, d.shape.empty() ? 1 : d.shape.back());
      uint64_t numel = spec.nbytes() / dtype_size(opt.dtype);
      constexpr uint64_t kChunk = 1ull << 20;  // elements
      for (uint64_t done = 0; done < numel;) {
        uint64_t n = std::min(kChunk, numel - done);
        buf.resize(n * dtype_size(opt.dtype));
        stream.fill(buf.data(), n, opt.dtype);
        writer.write(buf.data(), buf.size());
        progress.add(buf.size());
        done += n;
      }
      weight_map[d.name] = name;
    }
    writer.finish();
  }
  progress.finish();
  if (shards.size() > 1)
    write_file_atomic(tmp.path / "model.safetensors.index.json",
                      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2));

  json generation = {{"bos_token_id", bos},
                     {"eos_token_id", json::array({eos, bos})},
                     {"pad_token_id", bos},
                     {"do_sample", true},
                     {"temperature", 0.6},
                     {"top_k", 20},
                     {"top_p", 0.95},
                     {"transformers_version", "4.51.0"}};
  write_file_atomic(tmp.path / "generation_config.json", generation.dump(2));
  config["tern_synthetic"] = {{"preset", opt.preset}, {"seed", opt.seed},
                              {"note", "random weights made by tern synth; output text is meaningless"}};
  write_file_atomic(tmp.path / "config.json", config.dump(2));

  if (fs::exists(output)) fs::remove_all(output);
  fs::rename(tmp.path, output);
  tmp.committed = true;

  SynthResult r;
  r.config = config;
  r.total_bytes = total;
  r.num_tensors = decls.size();
  r.num_shards = shards.size();
  return r;
}

}  // namespace tern
