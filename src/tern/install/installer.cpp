#include "tern/install/installer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <thread>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/hash.h"
#include "tern/core/log.h"
#include "tern/core/progress.h"
#include "tern/core/thread_pool.h"
#include "tern/core/units.h"
#include "tern/format/architectures.h"
#include "tern/format/safetensors.h"
#include "tern/install/install_pipeline.h"
#include "tern/install/section_convert.h"
#include "tern/quant/quantize.h"

namespace tern {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Files copied verbatim when present (config.json is required).
constexpr const char* kCopiedFiles[] = {
    "config.json",        "generation_config.json", "tokenizer.json",     "tokenizer_config.json",
    "special_tokens_map.json", "chat_template.jinja", "chat_template.json"};

// Trunk tensors are converted in jobs of at most this many bytes of source
// or output (experts are one job per record).
constexpr uint64_t kChunkBytes = 16ull << 20;

// Removes the temporary directory unless the install committed.
struct TempDirGuard {
  fs::path path;
  bool committed = false;
  ~TempDirGuard() {
    if (!committed && !path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

// Vectors, routers and tensors of more than two dimensions (Qwen3-Next's
// conv1d taps [channels, 1, kernel]) stay F32.
bool keeps_full_precision(const TensorDecl& d) {
  return d.shape.size() != 2 || d.init == WeightInit::Router;
}

struct Planned {
  const TensorDecl* decl;
  const TensorInfo* src;
  TensorFormat from;
  TensorFormat to;
  const TensorInfo* fp8_scales = nullptr;  // an FP8 weight's "<name>_scale_inv"
};

// The scales of a fine-grained FP8 weight (F8_E4M3 [out, in]), checked
// against the weight and config.json's weight_block_size; the storage
// format's starting point is BF16, as DeepSeek's own conversion writes.
const TensorInfo* fp8_scales_of(const fs::path& source, const ModelConfig& cfg, const SafetensorsCheckpoint& ck,
                                const TensorInfo& t, const std::string& scales_name) {
  if (!cfg.fp8.present())
    fail("{}: tensor '{}' is F8_E4M3 but config.json has no fp8 quantization_config (weight_block_size) to read it "
         "with",
         source.string(), t.name);
  if (t.shape.size() != 2)
    fail("{}: tensor '{}' is F8_E4M3 {}; Tern reads FP8 weights as [out, in] matrices", source.string(), t.name,
         shape_str(t.shape));
  const std::string& name = scales_name;
  const TensorInfo* s = ck.find(name);
  if (!s) fail("{}: tensor '{}' is F8_E4M3 but its scales '{}' are missing from the checkpoint", source.string(), t.name, name);
  if (s->dtype != DType::F32 && s->dtype != DType::BF16 && s->dtype != DType::F16)
    fail("{}: tensor '{}' has dtype {}; FP8 scales are F32, BF16 or F16", source.string(), name, dtype_name(s->dtype));
  const std::vector<int64_t> want{(t.shape[0] + cfg.fp8.rows - 1) / cfg.fp8.rows,
                                  (t.shape[1] + cfg.fp8.cols - 1) / cfg.fp8.cols};
  if (s->shape != want)
    fail("{}: tensor '{}' has shape {} but '{}' {} in blocks of weight_block_size [{}, {}] implies {}", source.string(),
         name, shape_str(s->shape), t.name, shape_str(t.shape), cfg.fp8.rows, cfg.fp8.cols, shape_str(want));
  return s;
}

// The format a matrix with rows of `row` elements is stored in, given the
// request; a fallback is noted once per `what`.
TensorFormat storage_format(const std::string& what, int64_t row, bool full_precision, TensorFormat from,
                            std::optional<TensorFormat> wanted, bool fallback, std::set<std::string>& notes) {
  if (!wanted) return from;
  if (full_precision) return TensorFormat::F32;
  TensorFormat to = *wanted;
  auto fits = [&](TensorFormat f) { return static_cast<uint64_t>(row) % format_info(f).block_elements == 0; };
  if (fits(to) || !fallback) return to;
  TensorFormat alt = to == TensorFormat::Q4_K || to == TensorFormat::MXFP4 ? TensorFormat::Q4_0
                     : to == TensorFormat::Q6_K                          ? TensorFormat::Q8_0
                                                                         : from;
  if (!fits(alt)) alt = from;
  if (notes.insert(what).second)
    log(LogLevel::Info, "{}: rows of {} do not fit {} blocks; stored as {}", what, row, format_name(to), format_name(alt));
  return alt;
}

// The checkpoint layout of `arch` that ck holds: the first whose tensors are
// all present, else the one with most present (its first missing tensor is
// then the error).
size_t detect_layout(const ArchSpec& arch, const ModelConfig& cfg, const SafetensorsCheckpoint& ck) {
  if (arch.layouts.size() == 1) return 0;
  size_t best = 0, best_found = 0;
  for (size_t i = 0; i < arch.layouts.size(); ++i) {
    const CheckpointDecls decls = arch.tensors(cfg, i);
    size_t found = 0;
    for (const TensorDecl& d : decls.tensors) found += ck.find(d.name) ? 1 : 0;
    if (found == decls.tensors.size()) return i;
    if (found > best_found) best = i, best_found = found;
  }
  return best;
}

}  // namespace

InstallResult install_model(const InstallOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  if (opt.output.empty()) fail("no output path given");
  if (!fs::is_directory(opt.source)) fail("{}: not a directory (expected a Hugging Face model folder)", opt.source.string());
  fs::path output = fs::absolute(opt.output).lexically_normal();
  if (output.filename().empty()) output = output.parent_path();
  if (fs::exists(output)) {
    if (fs::equivalent(output, opt.source)) fail("refusing to install over the source model {}", output.string());
    if (!opt.force) fail("{} already exists; pass --force to replace it", output.string());
  }
  if (!fs::is_directory(output.parent_path()))
    fail("{}: parent directory does not exist", output.parent_path().string());

  ModelConfig cfg = load_model_config(opt.source / "config.json");
  const ArchSpec& arch = find_arch(cfg.architecture);
  SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(opt.source);
  if (!cfg.weight_prefix.empty()) {
    ck.rename_prefix(cfg.weight_prefix, "model.");
    if (!opt.quiet)
      log(LogLevel::Info, "{} checkpoint: reading the text model's weights under '{}'; other towers are not read",
          cfg.architecture, cfg.weight_prefix);
  }
  const size_t layout = detect_layout(arch, cfg, ck);
  const CheckpointDecls decls = arch.tensors(cfg, layout);
  if (arch.layouts.size() > 1 && !opt.quiet)
    log(LogLevel::Info, "{} checkpoint in the {} layout", cfg.architecture, arch.layouts[layout]);

  // Match every declared tensor to the checkpoint; trunk tensors get their storage format.
  std::unordered_map<std::string_view, const TensorInfo*> sources;
  std::unordered_map<std::string_view, const TensorInfo*> fp8_scales;  // FP8 weight -> its scales
  std::deque<std::string> scale_names;  // the FP8 scales' names (keys of sources)
  std::vector<Planned> plan;
  std::set<std::string> notes;
  uint64_t total_bytes = 0;
  for (const auto& d : decls.tensors) {
    const TensorInfo* t = ck.find(d.name);
    if (!t) {
      const std::string hint = arch.layouts.size() > 1
                                   ? fmt::format("; read as a {} checkpoint in the {} layout (layouts: {})",
                                                 cfg.architecture, arch.layouts[layout], fmt::join(arch.layouts, ", "))
                                   : "";
      fail("{}: tensor '{}' is missing from the checkpoint (config.json implies it{})", opt.source.string(), d.name, hint);
    }
    if (t->shape != d.shape)
      fail("{}: tensor '{}' has shape {} but config.json implies {} = {}", opt.source.string(), d.name,
           shape_str(t->shape), shape_str(d.shape), dim_fields_str(d));
    const TensorInfo* fp8 = nullptr;
    if (d.encoding == TensorEncoding::Float) {
      if (t->dtype == DType::F8_E4M3) {
        scale_names.push_back(d.name + "_scale_inv");
        fp8 = fp8_scales_of(opt.source, cfg, ck, *t, scale_names.back());
        fp8_scales.emplace(d.name, fp8);
        sources.emplace(scale_names.back(), fp8);
        total_bytes += fp8->nbytes;
      } else if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16) {
        fail("{}: tensor '{}' has dtype {}; install supports F32, BF16 and F16 weights, F8_E4M3 with block scales "
             "(fp8 quantization_config), and U8 only as MXFP4 blocks and scales",
             opt.source.string(), d.name, dtype_name(t->dtype));
      }
    } else if (t->dtype != DType::U8) {
      fail("{}: tensor '{}' has dtype {}; MXFP4 {} are U8", opt.source.string(), d.name, dtype_name(t->dtype),
           d.encoding == TensorEncoding::Mxfp4Blocks ? "blocks" : "scales");
    }
    sources.emplace(d.name, t);
    total_bytes += t->nbytes;
    if (d.is_expert) continue;
    if (d.encoding != TensorEncoding::Float) fail("{}: tensor '{}': a trunk tensor must be float", cfg.architecture, d.name);
    TensorFormat from = fp8 ? TensorFormat::BF16 : format_for_dtype(t->dtype);
    TensorFormat to = storage_format(d.name, d.shape.back(), keeps_full_precision(d), from, opt.trunk_format,
                                     opt.trunk_fallback, notes);
    if (!can_convert(from, to) && !is_quantized(to))
      fail("tensor '{}': cannot store {} as {}", d.name, format_name(from), format_name(to));
    try {
      format_bytes(to, d.shape);  // throws if rows do not fit the block size
    } catch (const Error& e) {
      fail("tensor '{}' {}: {}; choose another format (q4_0, q8_0 have 32-element blocks)", d.name,
           shape_str(d.shape), e.what());
    }
    plan.push_back({&d, t, from, to, fp8});
  }
  size_t extra = 0, towers = 0;
  uint64_t tower_bytes = 0;
  for (const auto& name : ck.names())
    if (!sources.count(name)) {
      // A multimodal checkpoint's other towers (vision, audio) are expected.
      const TensorInfo& t = ck.at(name);
      if (!cfg.weight_prefix.empty() && !t.name.starts_with(cfg.weight_prefix)) {
        ++towers;
        tower_bytes += t.nbytes;
      } else if (extra++ < 5) {
        log(LogLevel::Warn, "ignoring tensor '{}' not used by {}", name, cfg.architecture);
      }
    }
  if (extra > 5) log(LogLevel::Warn, "ignoring {} more unused tensors", extra - 5);
  if (towers > 0 && !opt.quiet)
    log(LogLevel::Info, "not reading {} tensors ({}) outside '{}' (the vision and audio towers): Tern runs the text model",
        towers, format_bytes(tower_bytes), cfg.weight_prefix);
  extra += towers;

  // Each expert section's source (checked against the description) and storage format.
  const DeclIndex decl_index = index_decls(decls.tensors);
  const size_t per_record = arch.expert_sections.size();
  if (decls.sections.size() != static_cast<size_t>(cfg.num_moe_layers() * cfg.num_experts) * per_record)
    fail("{}: {} expert sections declared for {} MoE layers x {} experts x {} sections", cfg.architecture,
         decls.sections.size(), cfg.num_moe_layers(), cfg.num_experts, per_record);
  struct SectionPlan {
    const SectionDecl* decl;
    SourceGeometry geometry;
    const TensorInfo* src;
    const TensorInfo* scales;  // MXFP4 scales, or an FP8 source's
    TensorFormat from, to;
    bool fp8 = false;
  };
  auto plan_section = [&](const SectionDecl& s) {
    SectionPlan sp{&s, section_source_geometry(s, decl_index), nullptr, nullptr, TensorFormat::F32, TensorFormat::F32};
    sp.src = sources.at(sp.geometry.tensor->name);
    if (sp.geometry.scales) sp.scales = sources.at(sp.geometry.scales->name);
    const bool mxfp4 = sp.geometry.tensor->encoding == TensorEncoding::Mxfp4Blocks;
    if (auto f = fp8_scales.find(sp.geometry.tensor->name); f != fp8_scales.end()) {
      sp.fp8 = true;
      sp.scales = f->second;
    }
    sp.from = mxfp4 ? TensorFormat::MXFP4 : sp.fp8 ? TensorFormat::BF16 : format_for_dtype(sp.src->dtype);
    const std::string what = fmt::format("expert section '{}'", s.name);
    if (s.shape.size() == 1) {
      sp.to = TensorFormat::F32;  // vectors in records are F32 (the engine reads them in place)
    } else if (mxfp4 && (!opt.expert_format || *opt.expert_format == TensorFormat::MXFP4 || opt.keep_mxfp4_experts)) {
      sp.to = TensorFormat::MXFP4;  // bit-exact repack, no requantization
    } else {
      sp.to = storage_format(what, s.shape.back(), false, sp.from, opt.expert_format, opt.expert_fallback, notes);
    }
    if (!mxfp4 && !can_convert(sp.from, sp.to) && !is_quantized(sp.to))
      fail("{} from '{}': cannot store {} as {}", what, sp.src->name, format_name(sp.from), format_name(sp.to));
    try {
      format_bytes(sp.to, s.shape);
    } catch (const Error& e) {
      fail("{} from '{}' {}: {}; choose another format (q4_0, q8_0 have 32-element blocks)", what, sp.src->name,
           shape_str(s.shape), e.what());
    }
    return sp;
  };

  // Temporary directory beside the output (same file system, so rename is atomic).
  TempDirGuard guard{output.parent_path() / fmt::format(".{}.installing-{}", output.filename().string(), ::getpid())};
  fs::remove_all(guard.path);
  fs::create_directory(guard.path);

  Manifest m;
  m.created_by = std::string("tern ") + TERN_VERSION;
  m.architecture = cfg.architecture;
  m.config = cfg.raw;
  Progress progress("install", total_bytes, opt.quiet);
  File trunk_out = File::create(guard.path / m.trunk_file);
  File experts_out = File::create(guard.path / m.experts_file);

  // The jobs: trunk tensors in chunks of whole rows, experts one record
  // each. Offsets in the output are fixed here, so jobs may run in any order;
  // they run in the order of their first source byte.
  std::vector<InstallJob> jobs;
  std::vector<std::pair<uint32_t, uint64_t>> source_order;
  auto source_range = [&](const Planned& p, uint64_t first, uint64_t bytes) {
    return SourceRange{&ck.shard(p.src->file_index).file(), p.src->offset + first, bytes};
  };

  // trunk.bin: trunk tensors in declaration order, 64-byte aligned; each
  // tensor's checksum runs over its chunks in order (finish runs in job order
  // and a tensor's chunks are adjacent in the source).
  std::vector<std::unique_ptr<Hasher>> hashers;
  uint64_t offset = 0;
  for (const auto& p : plan) {
    if (p.decl->is_expert) continue;
    TrunkTensor tt{p.decl->name, p.to, p.decl->shape, round_up(offset, kTrunkAlignment), 0, 0};
    tt.size = format_bytes(p.to, p.decl->shape);
    offset = tt.offset + tt.size;
    const size_t index = m.trunk.size();
    m.trunk.push_back(tt);
    hashers.push_back(std::make_unique<Hasher>());
    const int64_t row = p.decl->shape.empty() ? 1 : p.decl->shape.back();
    const auto rows = static_cast<int64_t>(p.src->numel() / static_cast<uint64_t>(row));
    const uint64_t in_row = p.src->nbytes / static_cast<uint64_t>(std::max<int64_t>(1, rows));
    const uint64_t out_row = static_cast<uint64_t>(format_bytes(p.to, {row}));
    auto rows_per_job =
        static_cast<int64_t>(std::max<uint64_t>(1, kChunkBytes / std::max<uint64_t>({1, in_row, out_row})));
    // FP8: whole blocks of rows per job, with the scale rows they use.
    const int64_t block_rows = p.fp8_scales ? cfg.fp8.rows : 1;
    rows_per_job = std::max(block_rows, rows_per_job / block_rows * block_rows);
    const uint64_t scale_row = p.fp8_scales ? p.fp8_scales->nbytes / static_cast<uint64_t>(p.fp8_scales->shape[0]) : 0;
    const int64_t chunks = std::max<int64_t>(1, (rows + rows_per_job - 1) / rows_per_job);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t first = c * rows_per_job;
      const int64_t n = std::min(rows_per_job, rows - first);
      const bool last = c + 1 == chunks;
      InstallJob job;
      job.inputs.push_back(source_range(p, static_cast<uint64_t>(first) * in_row, static_cast<uint64_t>(n) * in_row));
      job.output_bytes = static_cast<uint64_t>(n) * out_row;
      if (p.fp8_scales) {
        const auto b0 = static_cast<uint64_t>(first / block_rows);
        const auto nb = static_cast<uint64_t>((first + n + block_rows - 1) / block_rows) - b0;
        job.inputs.push_back({&ck.shard(p.fp8_scales->file_index).file(), p.fp8_scales->offset + b0 * scale_row,
                              nb * scale_row});
        job.progress_bytes += nb * scale_row;
        job.convert = [&p, &cfg, n, row, first, in_row](const uint8_t* in, uint8_t* out, ThreadPool& tp) {
          const Fp8Scales s{in + static_cast<uint64_t>(n) * in_row, format_for_dtype(p.fp8_scales->dtype),
                            cfg.fp8.rows, cfg.fp8.cols, first, p.src->name};
          convert_fp8_rows(in, s, out, p.to, n, row, tp);
        };
      } else {
        job.convert = [&p, n, row](const uint8_t* in, uint8_t* out, ThreadPool& tp) {
          convert_rows(in, p.from, out, p.to, n, row, tp);
        };
      }
      job.finish = [&m, &hashers, index, last, bytes = job.output_bytes](const uint8_t* out) {
        hashers[index]->update(out, bytes);
        if (last) m.trunk[index].checksum = hashers[index]->digest();
      };
      job.output = &trunk_out;
      job.output_offset = tt.offset + static_cast<uint64_t>(first) * out_row;
      job.progress_bytes += static_cast<uint64_t>(n) * in_row;
      source_order.push_back({p.src->file_index, job.inputs[0].offset});
      jobs.push_back(std::move(job));
    }
  }
  m.trunk_size = round_up(offset, kTrunkAlignment);

  // experts.bin: per MoE layer a fixed-stride array of 4 KiB aligned
  // records. One job per record reads each source slice it needs once (gate
  // and up come from one fused slice), in source order.
  offset = 0;
  size_t next_section = 0;
  m.expert_layers.reserve(static_cast<size_t>(cfg.num_layers));  // jobs keep references to layers
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    if (!cfg.layer_is_moe(l)) continue;
    ExpertLayer layer;
    layer.layer = l;
    layer.num_experts = cfg.num_experts;
    layer.offset = round_up(offset, kExpertAlignment);
    layer.checksums.assign(static_cast<size_t>(cfg.num_experts), 0);
    m.expert_layers.push_back(std::move(layer));
    ExpertLayer& L = m.expert_layers.back();
    for (int64_t e = 0; e < cfg.num_experts; ++e) {
      std::vector<SectionPlan> record;
      for (size_t i = 0; i < per_record; ++i) {
        const SectionDecl& s = decls.sections[next_section++];
        if (s.layer != l || s.expert != e || s.name != arch.expert_sections[i])
          fail("{}: expert section {} is '{}' of (layer {}, expert {}), expected '{}' of (layer {}, expert {})",
               cfg.architecture, next_section - 1, s.name, s.layer, s.expert, arch.expert_sections[i], l, e);
        record.push_back(plan_section(s));
      }
      if (e == 0) {
        uint64_t so = 0;
        for (const SectionPlan& sp : record) {
          ExpertSection sec{sp.decl->name, sp.to, sp.decl->shape, so, format_bytes(sp.to, sp.decl->shape)};
          so += sec.size;
          L.sections.push_back(std::move(sec));
        }
        L.record_size = so;
        L.stride = round_up(so, kExpertAlignment);
      }
      // The distinct source slices, in source order, back to back in the input buffer.
      struct Slice {
        const TensorInfo* t;
        int64_t index;
        uint64_t at = 0;
      };
      std::vector<Slice> slices;
      auto slice_of = [&](const TensorInfo* t, int64_t index) {
        for (size_t i = 0; i < slices.size(); ++i)
          if (slices[i].t == t && slices[i].index == index) return i;
        slices.push_back({t, index});
        return slices.size() - 1;
      };
      auto slice_range = [](const Slice& s) {
        const uint64_t size = s.index >= 0 ? s.t->nbytes / static_cast<uint64_t>(s.t->shape[0]) : s.t->nbytes;
        return std::pair{s.t->offset + (s.index >= 0 ? static_cast<uint64_t>(s.index) * size : 0), size};
      };
      std::vector<std::pair<size_t, size_t>> uses;  // per section: (data slice, scales slice or npos)
      for (const SectionPlan& sp : record) {
        const int64_t index = sp.decl->source.expert_index;
        uses.push_back({slice_of(sp.src, index), sp.scales ? slice_of(sp.scales, index) : std::string::npos});
      }
      std::vector<size_t> order(slices.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::pair(slices[a].t->file_index, slice_range(slices[a]).first) <
               std::pair(slices[b].t->file_index, slice_range(slices[b]).first);
      });
      InstallJob job;
      uint64_t at = 0;
      for (size_t i : order) {
        const auto [first, size] = slice_range(slices[i]);
        slices[i].at = at;
        at += size;
        job.inputs.push_back({&ck.shard(slices[i].t->file_index).file(), first, size});
        job.progress_bytes += size;
      }
      std::vector<SectionConversion> conversions;
      for (size_t i = 0; i < record.size(); ++i) {
        const SectionPlan& sp = record[i];
        const ExpertSection& sec = L.sections[i];
        if (sp.decl->shape != sec.shape)
          fail("expert section '{}' of (layer {}, expert {}): shape {} differs from expert 0's {}", sec.name, l, e,
               shape_str(sp.decl->shape), shape_str(sec.shape));
        if (sp.to != sec.format)
          fail("expert section '{}' of (layer {}, expert {}) from '{}': stored as {} but expert 0 of its layer is {}",
               sec.name, l, e, sp.src->name, format_name(sp.to), format_name(sec.format));
        SectionConversion c;
        c.source_name = sp.scales && !sp.fp8 ? sp.scales->name : sp.src->name;
        if (sp.fp8) {
          c.fp8_block_rows = cfg.fp8.rows;
          c.fp8_block_cols = cfg.fp8.cols;
          c.fp8_scale_format = format_for_dtype(sp.scales->dtype);
        }
        c.expert = sp.decl->source.expert_index;
        c.encoding = sp.geometry.tensor->encoding;
        c.from = sp.from;
        c.to = sp.to;
        c.rows = sp.decl->shape[0];
        c.cols = sp.decl->shape.size() == 1 ? 1 : sp.decl->shape[1];
        c.src_rows = sp.geometry.out;
        c.transposed = sp.decl->source.transposed;
        c.row_start = sp.decl->source.row_start;
        c.row_step = sp.decl->source.row_step;
        c.data_offset = slices[uses[i].first].at;
        if (uses[i].second != std::string::npos) c.scales_offset = slices[uses[i].second].at;
        c.out_offset = sec.offset;
        conversions.push_back(std::move(c));
      }
      job.output_bytes = L.record_size;
      job.convert = [conversions = std::move(conversions)](const uint8_t* in, uint8_t* out, ThreadPool& tp) {
        for (const SectionConversion& c : conversions) convert_section(c, in, out, tp);
      };
      job.finish = [&L, e](const uint8_t* out) { L.checksums[static_cast<size_t>(e)] = xxh3_64(out, L.record_size); };
      job.output = &experts_out;
      job.output_offset = L.expert_offset(e);
      source_order.push_back({slices[order.front()].t->file_index, job.inputs.front().offset});
      jobs.push_back(std::move(job));
    }
    offset = L.expert_offset(L.num_experts - 1) + L.stride;
  }
  m.experts_size = round_up(offset, kExpertAlignment);

  // Run in source order (stable: a trunk tensor's chunks keep their order).
  {
    std::vector<size_t> order(jobs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return source_order[a] < source_order[b]; });
    std::vector<InstallJob> sorted;
    sorted.reserve(jobs.size());
    for (size_t i : order) sorted.push_back(std::move(jobs[i]));
    jobs = std::move(sorted);
  }
  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Install jobs take milliseconds each: idle workers sleep at once instead of
  // spinning (same wall time, 12-20% less CPU; docs/RESULTS.md).
  ThreadPool pool(threads, std::chrono::microseconds(0));
  run_install_jobs(jobs, pool, progress, opt.direct_reads);
  for (File* f : {&trunk_out, &experts_out}) {
    f->truncate(f == &trunk_out ? m.trunk_size : m.experts_size);
    f->sync();
  }
  progress.finish();

  // Tokenizer and config files, verbatim.
  for (const char* name : kCopiedFiles) {
    fs::path src = opt.source / name;
    if (!fs::exists(src)) continue;
    std::string content = read_text_file(src);
    File f = File::create(guard.path / name);
    f.write_all(content.data(), content.size());
    f.sync();
    m.files.push_back({name, content.size(), xxh3_64(content.data(), content.size())});
  }
  if (!fs::exists(opt.source / "tokenizer.json"))
    log(LogLevel::Warn, "{} has no tokenizer.json; text commands will not work with this model", opt.source.string());

  m.source = {{"path", fs::absolute(opt.source).string()},
              {"layout", arch.layouts[layout]},
              {"shards", ck.shard_count()},
              {"checkpoint_bytes", ck.total_bytes()},
              {"ignored_tensors", extra}};
  // The manifest is written last: its presence marks a complete install.
  write_file_atomic(guard.path / "manifest.json", manifest_to_json(m).dump(1));
  fsync_directory(guard.path);

  fs::path old;
  if (fs::exists(output)) {
    old = output.parent_path() / fmt::format(".{}.old-{}", output.filename().string(), ::getpid());
    fs::rename(output, old);
  }
  fs::rename(guard.path, output);
  guard.committed = true;
  fsync_directory(output.parent_path());
  if (!old.empty()) fs::remove_all(old);

  InstallResult r;
  r.manifest = std::move(m);
  r.bytes_written = r.manifest.trunk_size + r.manifest.experts_size;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tern
