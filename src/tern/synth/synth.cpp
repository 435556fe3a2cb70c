#include "tern/synth/synth.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/progress.h"
#include "tern/core/tensor_format.h"
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
TokenizerFiles tokenizer_files(const SynthOptions& opt, SyntheticSpecials specials) {
  TokenizerFiles files;
  if (opt.tokenizer.empty()) {
    SyntheticTokenizerOptions tok_opt;
    tok_opt.specials = specials;
    auto built = build_synthetic_tokenizer(tok_opt);
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

// The id of a token piece; if the tokenizer lacks it, the first of the
// family's eos pieces it has, else 0.
int32_t token_id_for(const Tokenizer& tok, const SynthFamily& family, std::string_view piece) {
  int32_t id = tok.token_id(piece);
  for (size_t i = 0; id < 0 && i < family.eos.size(); ++i) id = tok.token_id(family.eos[i]);
  return id >= 0 ? id : 0;
}

size_t synth_layout(const ArchSpec& arch, const SynthOptions& opt) {
  return opt.layout.empty() ? 0 : arch.layout_index(opt.layout);
}

DType tensor_dtype(const TensorDecl& d, DType float_dtype) {
  return d.encoding == TensorEncoding::Float ? float_dtype : DType::U8;
}

// Whether a synthesized FP8 checkpoint stores `d` as FP8: the projections
// of the decoder layers, as the fine-grained FP8 releases quantize them.
bool fp8_weight(const TensorDecl& d, const SynthOptions& opt) {
  return opt.fp8_block > 0 && d.encoding == TensorEncoding::Float && d.init == WeightInit::Linear &&
         d.shape.size() == 2 && d.name.starts_with("model.layers.") && d.name.ends_with(".weight");
}

// Nearest E4M3 (ties to even), saturating at +-448.
uint8_t f32_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (!(a < 448.0f)) return sign | 0x7E;
  int e = 0;
  std::frexp(a, &e);                    // a in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, -6);  // below 2^-6: subnormal steps of 2^-9
  const float step = std::ldexp(1.0f, exp - 3);
  const float v = std::nearbyint(a / step) * step;
  if (v >= 448.0f) return sign | 0x7E;
  if (v < std::ldexp(1.0f, -6)) return sign | static_cast<uint8_t>(v / std::ldexp(1.0f, -9));
  std::frexp(v, &e);
  const int m = static_cast<int>(std::ldexp(v, -(e - 1)) * 8.0f) - 8;
  return sign | static_cast<uint8_t>((e - 1 + 7) << 3 | m);
}

// Writes `d` as FP8 codes, a band of fp8_block rows at a time, and keeps its
// scales for the "_scale_inv" tensor written next.
void write_fp8_weight(const TensorDecl& d, const SynthOptions& opt, SafetensorsWriter& writer, Progress& progress,
                      std::vector<float>& scales) {
  const int64_t out = d.shape[0], in = d.shape[1], b = opt.fp8_block;
  const int64_t scale_cols = (in + b - 1) / b;
  scales.assign(static_cast<size_t>(((out + b - 1) / b) * scale_cols), 0.0f);
  WeightStream stream(opt.seed, d.name, d.init, in);
  std::vector<float> band;
  std::vector<uint8_t> codes;
  for (int64_t r0 = 0; r0 < out; r0 += b) {
    const int64_t rows = std::min(b, out - r0);
    band.resize(static_cast<size_t>(rows * in));
    stream.fill(band.data(), band.size(), DType::F32);
    codes.resize(band.size());
    for (int64_t c0 = 0; c0 < in; c0 += b) {
      float amax = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c0; c < std::min(in, c0 + b); ++c) amax = std::max(amax, std::fabs(band[r * in + c]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      scales[static_cast<size_t>((r0 / b) * scale_cols + c0 / b)] = scale;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c0; c < std::min(in, c0 + b); ++c) codes[r * in + c] = f32_to_e4m3(band[r * in + c] / scale);
    }
    writer.write(codes.data(), codes.size());
    progress.add(codes.size());
  }
}

struct TempDir {
  fs::path path;
  bool committed = false;
  ~TempDir() {
    std::error_code ec;
    if (!committed) fs::remove_all(path, ec);
  }
};

// Elements generated and written at a time.
constexpr uint64_t kChunk = 1ull << 20;

// Writes a float tensor that holds, slice by slice of dimension 0, the
// dequantized values of an MXFP4 pair of the other layout (TensorDecl::
// twin_*): regenerates the pair's streams, decodes them, and transposes each
// slice when the tensor is stored [in, out].
void write_mxfp4_twin(const TensorDecl& d, uint64_t seed, DType dtype, SafetensorsWriter& writer, Progress& progress) {
  if (d.shape.size() != 3) fail("tensor '{}': an MXFP4 twin must be [slices, a, b]", d.name);
  const int64_t slices = d.shape[0];
  const int64_t out = d.twin_transposed ? d.shape[2] : d.shape[1];
  const int64_t in = d.twin_transposed ? d.shape[1] : d.shape[2];
  if (in % 32 != 0) fail("tensor '{}': rows of {} are not MXFP4 blocks of 32", d.name, in);
  const int64_t groups = out * (in / 32);
  Mxfp4BlockStream blocks_stream(seed, d.twin_blocks);
  Mxfp4ScaleStream scales_stream(seed, d.twin_scales, in);
  std::vector<uint8_t> blocks(static_cast<size_t>(groups * 16)), scales(static_cast<size_t>(groups));
  std::vector<float> values(static_cast<size_t>(out * in)), stored;
  std::vector<char> bytes(static_cast<size_t>(out * in) * dtype_size(dtype));
  for (int64_t e = 0; e < slices; ++e) {
    blocks_stream.fill(blocks.data(), blocks.size());
    scales_stream.fill(scales.data(), scales.size());
    dequantize_hf_mxfp4(blocks.data(), scales.data(), groups, values.data());  // [out][in]
    const float* src = values.data();
    if (d.twin_transposed) {  // to [in][out], in 64 x 64 tiles
      stored.resize(values.size());
      constexpr int64_t kTile = 64;
      for (int64_t o0 = 0; o0 < out; o0 += kTile)
        for (int64_t i0 = 0; i0 < in; i0 += kTile)
          for (int64_t o = o0; o < std::min(out, o0 + kTile); ++o)
            for (int64_t i = i0; i < std::min(in, i0 + kTile); ++i) stored[i * out + o] = values[o * in + i];
      src = stored.data();
    }
    convert_elements(src, TensorFormat::F32, bytes.data(), format_for_dtype(dtype), values.size());
    writer.write(bytes.data(), bytes.size());
    progress.add(bytes.size());
  }
}

void write_tensor(const TensorDecl& d, uint64_t seed, DType float_dtype, SafetensorsWriter& writer,
                  Progress& progress) {
  if (d.init == WeightInit::Mxfp4Dequantized) return write_mxfp4_twin(d, seed, float_dtype, writer, progress);
  const DType dtype = tensor_dtype(d, float_dtype);
  const uint64_t numel = TensorSpec{d.name, dtype, d.shape}.nbytes() / dtype_size(dtype);
  const int64_t row = d.shape.empty() ? 1 : d.shape.back();
  std::optional<WeightStream> floats;
  std::optional<Mxfp4BlockStream> blocks;
  std::optional<Mxfp4ScaleStream> scales;
  if (d.init == WeightInit::Mxfp4Blocks) blocks.emplace(seed, d.name);
  else if (d.init == WeightInit::Mxfp4Scales) scales.emplace(seed, d.name, row * 32);
  else floats.emplace(seed, d.name, d.init, row);
  if (dtype == DType::U8 && !blocks && !scales) fail("tensor '{}': U8 tensors are MXFP4 blocks or scales", d.name);
  std::vector<char> buf;
  // Chunks are multiples of 8 bytes, so the block stream's bytes do not
  // depend on them (Mxfp4BlockStream draws 8 at a time).
  for (uint64_t done = 0; done < numel;) {
    const uint64_t n = std::min(kChunk, numel - done);
    buf.resize(n * dtype_size(dtype));
    auto* p = reinterpret_cast<uint8_t*>(buf.data());
    if (blocks) blocks->fill(p, n);
    else if (scales) scales->fill(p, n);
    else floats->fill(buf.data(), n, dtype);
    writer.write(buf.data(), buf.size());
    progress.add(buf.size());
    done += n;
  }
}

}  // namespace

std::vector<std::string> synth_presets(const std::string& architecture) {
  std::vector<std::string> names;
  for (const auto& p : all_synth_presets())
    if (p.architecture == architecture) names.push_back(p.name);
  return names;
}

namespace {

// Gemma 4's release is multimodal: its config.json wraps the text model's
// config (gemma4_text) as text_config beside the vision tower's, and its
// text weights sit under model.language_model.
json gemma4_multimodal_config(json text) {
  text["model_type"] = "gemma4_text";
  text.erase("architectures");
  json c = {{"architectures", {"Gemma4ForConditionalGeneration"}},
            {"model_type", "gemma4"},
            {"audio_config", nullptr},
            {"boi_token_id", 255999},
            {"eoi_token_id", 258882},
            {"image_token_id", 258880},
            {"initializer_range", 0.02},
            {"tie_word_embeddings", text.value("tie_word_embeddings", true)},
            {"vision_config", {{"model_type", "gemma4_vision"}, {"hidden_size", 16}, {"patch_size", 4}}},
            {"vision_soft_tokens_per_image", 16}};
  if (text.contains("torch_dtype")) c["torch_dtype"] = text["torch_dtype"];
  c["text_config"] = std::move(text);
  return c;
}

// The checkpoint's name of a declared tensor (a multimodal checkpoint's text
// weights: weight_prefix instead of "model.").
std::string checkpoint_name(const ModelConfig& cfg, const std::string& name) {
  if (cfg.weight_prefix.empty() || !name.starts_with("model.")) return name;
  return cfg.weight_prefix + name.substr(6);
}

// A few stand-ins for the towers a multimodal checkpoint carries beside the
// text model (the installer must leave them unread).
std::vector<TensorDecl> tower_tensors(const ModelConfig& cfg) {
  if (cfg.weight_prefix.empty()) return {};
  return {tensor_decl("model.vision_tower.patch_embedder.input_proj.weight", {16, 48}, {"16", "48"}),
          tensor_decl("model.embed_vision.embedding_projection.weight", {cfg.hidden_size, 16}, {"hidden_size", "16"})};
}

}  // namespace

json synth_config(const SynthOptions& opt, int64_t tokenizer_vocab_size) {
  const ArchSpec& arch = find_arch(opt.architecture);  // clear error for unknown architectures first
  const SynthPreset& preset = find_synth_preset(opt.architecture, opt.preset);
  const SynthFamily& family = find_synth_family(opt.architecture);
  const size_t layout = synth_layout(arch, opt);
  json config = preset.config;
  // Presets without a vocab_size follow the tokenizer exactly, so every id
  // the model can emit decodes (real checkpoints pad; the engine masks those).
  if (!config.contains("vocab_size")) config["vocab_size"] = tokenizer_vocab_size;
  for (auto it = opt.overrides.begin(); it != opt.overrides.end(); ++it) {
    auto alias = std::find_if(family.field_aliases.begin(), family.field_aliases.end(),
                              [&](const auto& a) { return a.first == it.key(); });
    if (alias == family.field_aliases.end()) config[it.key()] = it.value();
    else
      for (const std::string& field : alias->second) config[field] = it.value();
  }
  // A preset's layer_types is a pattern repeated over the layers.
  if (config.contains("layer_types") && config["layer_types"].is_array() && !config["layer_types"].empty() &&
      !opt.overrides.contains("layer_types") && config.contains("num_hidden_layers") &&
      config["num_hidden_layers"].is_number_integer()) {
    const auto layers = config["num_hidden_layers"].get<int64_t>();
    const json pattern = config["layer_types"];
    if (layers >= 1 && layers <= config_limits::kMaxLayers && static_cast<int64_t>(pattern.size()) != layers) {
      json types = json::array();
      for (int64_t l = 0; l < layers; ++l) types.push_back(pattern[static_cast<size_t>(l) % pattern.size()]);
      config["layer_types"] = types;
    }
  }
  // YaRN keeps its original context: a new max_position_embeddings changes the factor.
  if (opt.overrides.contains("max_position_embeddings") && !opt.overrides.contains("rope_scaling") &&
      config.contains("rope_scaling") && config["rope_scaling"].is_object()) {
    json& rs = config["rope_scaling"];
    if (rs.value("rope_type", "") == "yarn" && rs.contains("original_max_position_embeddings") &&
        rs["original_max_position_embeddings"].is_number_integer() && config["max_position_embeddings"].is_number() &&
        rs["original_max_position_embeddings"].get<int64_t>() > 0)
      rs["factor"] = config["max_position_embeddings"].get<double>() /
                     rs["original_max_position_embeddings"].get<double>();
  }
  config["torch_dtype"] = opt.dtype == DType::F32 ? "float32" : opt.dtype == DType::F16 ? "float16" : "bfloat16";
  ModelConfig cfg = parse_model_config(config, "synthesized config.json");  // validates
  // quantization_config describes MXFP4 tensors: only a layout with them has it.
  const CheckpointDecls decls = arch.tensors(cfg, layout);
  const bool quantized = std::any_of(decls.tensors.begin(), decls.tensors.end(),
                                     [](const TensorDecl& d) { return d.encoding != TensorEncoding::Float; });
  if (quantized && opt.fp8_block > 0)
    fail("--fp8 writes float layouts as FP8; {} in the {} layout already has quantized tensors", opt.architecture,
         arch.layouts[layout]);
  if (opt.fp8_block > 0)
    config["quantization_config"] = {{"activation_scheme", "dynamic"},
                                     {"fmt", "e4m3"},
                                     {"quant_method", "fp8"},
                                     {"weight_block_size", {opt.fp8_block, opt.fp8_block}}};
  else if (!quantized)
    config.erase("quantization_config");
  if (config["vocab_size"].get<int64_t>() < tokenizer_vocab_size)
    fail("vocab_size {} is smaller than the tokenizer's {} tokens", config["vocab_size"].get<int64_t>(),
         tokenizer_vocab_size);
  if (opt.architecture == "gemma4") config = gemma4_multimodal_config(std::move(config));
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
  const ArchSpec& arch = find_arch(opt.architecture);
  const size_t layout = synth_layout(arch, opt);
  const SynthFamily& family = find_synth_family(opt.architecture);

  TempDir tmp{output.parent_path() / fmt::format(".{}.synth-{}", output.filename().string(), ::getpid())};
  fs::remove_all(tmp.path);
  fs::create_directory(tmp.path);

  // Tokenizer first: the vocabulary size follows it.
  TokenizerFiles tok_files = tokenizer_files(opt, family.specials);
  write_file_atomic(tmp.path / "tokenizer.json", tok_files.tokenizer_json);
  if (!tok_files.tokenizer_config_json.empty())
    write_file_atomic(tmp.path / "tokenizer_config.json", tok_files.tokenizer_config_json);
  Tokenizer tok = Tokenizer::load(tmp.path / "tokenizer.json");

  json config = synth_config(opt, tok.vocab_size());
  // A field named more than once becomes a list (GLM-4.5's eos_token_id).
  std::set<std::string> token_fields;
  for (const auto& [field, piece] : family.config_token_ids) {
    const int32_t id = token_id_for(tok, family, piece);
    for (json* target : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
      if (!target) continue;
      json& c = *target;
      if (!token_fields.contains(field)) {
        c[field] = id;
        continue;
      }
      if (!c[field].is_array()) c[field] = json::array({c[field]});
      c[field].push_back(id);
    }
    token_fields.insert(field);
  }
  ModelConfig cfg = parse_model_config(config, "synthesized config.json");
  const CheckpointDecls decls = arch.tensors(cfg, layout);

  // Assign tensors to shards of at most shard_bytes (a tensor never splits).
  std::vector<std::vector<TensorSpec>> shards(1);
  std::vector<const TensorDecl*> order;
  uint64_t shard_used = 0, total = 0;
  auto place = [&](TensorSpec spec, const TensorDecl* d) {
    const uint64_t n = spec.nbytes();
    if (shard_used > 0 && shard_used + n > opt.shard_bytes) {
      shards.emplace_back();
      shard_used = 0;
    }
    shards.back().push_back(std::move(spec));
    shard_used += n;
    total += n;
    order.push_back(d);  // nullptr: the scales of the FP8 weight before it
  };
  const std::vector<TensorDecl> towers = tower_tensors(cfg);
  for (const auto& d : decls.tensors) {
    const std::string name = checkpoint_name(cfg, d.name);
    if (!fp8_weight(d, opt)) {
      place({name, tensor_dtype(d, opt.dtype), d.shape}, &d);
      continue;
    }
    place({name, DType::F8_E4M3, d.shape}, &d);
    const int64_t b = opt.fp8_block;
    place({name + "_scale_inv", DType::F32, {(d.shape[0] + b - 1) / b, (d.shape[1] + b - 1) / b}}, nullptr);
  }
  for (const auto& d : towers) place({d.name, tensor_dtype(d, opt.dtype), d.shape}, &d);

  Progress progress("synth", total, opt.quiet);
  json weight_map = json::object();
  size_t next_decl = 0;
  std::vector<float> fp8_scales;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string name = shards.size() == 1
                           ? "model.safetensors"
                           : fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards.size());
    SafetensorsWriter writer(tmp.path / name, shards[s]);
    for (size_t i = 0; i < shards[s].size(); ++i) {
      const TensorDecl* d = order[next_decl++];
      weight_map[shards[s][i].name] = name;
      if (!d) {  // the FP8 weight just written's scales
        writer.write(fp8_scales.data(), fp8_scales.size() * sizeof(float));
        progress.add(fp8_scales.size() * sizeof(float));
      } else if (fp8_weight(*d, opt)) {
        write_fp8_weight(*d, opt, writer, progress, fp8_scales);
      } else {
        write_tensor(*d, opt.seed, opt.dtype, writer, progress);
      }
    }
    writer.finish();
  }
  progress.finish();
  if (shards.size() > 1)
    write_file_atomic(tmp.path / "model.safetensors.index.json",
                      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2));

  json generation = family.generation;
  if (!family.bos.empty()) generation["bos_token_id"] = token_id_for(tok, family, family.bos);
  if (!family.pad.empty()) generation["pad_token_id"] = token_id_for(tok, family, family.pad);
  json eos = json::array();
  for (const std::string& piece : family.eos)
    if (tok.token_id(piece) >= 0) eos.push_back(tok.token_id(piece));
  if (eos.empty()) eos.push_back(token_id_for(tok, family, family.eos.front()));
  generation["eos_token_id"] = eos;
  write_file_atomic(tmp.path / "generation_config.json", generation.dump(2));
  config["tern_synthetic"] = {{"preset", opt.preset}, {"seed", opt.seed},
                              {"note", "random weights made by tern synth; output text is meaningless"}};
  if (arch.layouts.size() > 1) config["tern_synthetic"]["layout"] = arch.layouts[layout];
  write_file_atomic(tmp.path / "config.json", config.dump(2));

  if (fs::exists(output)) fs::remove_all(output);
  fs::rename(tmp.path, output);
  tmp.committed = true;

  SynthResult r;
  r.config = config;
  r.total_bytes = total;
  r.num_tensors = decls.tensors.size();
  r.num_shards = shards.size();
  return r;
}

}  // namespace tern
