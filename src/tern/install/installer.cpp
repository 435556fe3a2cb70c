#include "tern/install/installer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/hash.h"
#include "tern/core/log.h"
#include "tern/core/progress.h"
#include "tern/core/thread_pool.h"
#include "tern/format/architectures.h"
#include "tern/format/safetensors.h"
#include "tern/install/install_pipeline.h"
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
// A thread takes at least this many source bytes of rows at a time.
constexpr uint64_t kMinBytesPerThread = 256ull << 10;

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

bool keeps_full_precision(const TensorDecl& d) {
  return d.shape.size() < 2 || d.init == WeightInit::Router;
}

struct Planned {
  const TensorDecl* decl;
  const TensorInfo* src;
  TensorFormat from;
  TensorFormat to;
};

// Converts `rows` rows of `row` elements from `from` (source bytes, back to
// back) into `to`, splitting the rows across the pool's threads.
void convert_rows(const uint8_t* in, TensorFormat from, uint8_t* out, TensorFormat to, int64_t rows, int64_t row,
                  ThreadPool& pool) {
  const auto in_row = static_cast<uint64_t>(format_bytes(from, {row}));
  const auto out_row = static_cast<uint64_t>(format_bytes(to, {row}));
  const auto min_rows = static_cast<int64_t>(std::max<uint64_t>(1, kMinBytesPerThread / std::max<uint64_t>(1, in_row)));
  pool.parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
    const uint8_t* src = in + static_cast<uint64_t>(begin) * in_row;
    uint8_t* dst = out + static_cast<uint64_t>(begin) * out_row;
    if (from == to) {
      std::memcpy(dst, src, static_cast<uint64_t>(end - begin) * in_row);
    } else if (!is_quantized(to)) {
      convert_elements(src, from, dst, to, static_cast<uint64_t>((end - begin) * row));
    } else {
      thread_local std::vector<float> f32;
      f32.resize(static_cast<size_t>(row));
      for (int64_t r = begin; r < end; ++r, src += in_row, dst += out_row) {
        convert_elements(src, from, f32.data(), TensorFormat::F32, static_cast<uint64_t>(row));
        quantize_row(to, f32.data(), dst, row);
      }
    }
  });
}

// The format a tensor is stored in, given the request.
TensorFormat storage_format(const TensorDecl& d, TensorFormat from, std::optional<TensorFormat> wanted, bool fallback) {
  if (!wanted) return from;
  if (keeps_full_precision(d)) return TensorFormat::F32;
  TensorFormat to = *wanted;
  const uint64_t row = static_cast<uint64_t>(d.shape.back());
  auto fits = [&](TensorFormat f) { return row % format_info(f).block_elements == 0; };
  if (fits(to) || !fallback) return to;
  TensorFormat alt = to == TensorFormat::Q4_K || to == TensorFormat::MXFP4 ? TensorFormat::Q4_0
                     : to == TensorFormat::Q6_K                          ? TensorFormat::Q8_0
                                                                         : from;
  if (!fits(alt)) alt = from;
  log(LogLevel::Info, "{}: rows of {} do not fit {} blocks; stored as {}", d.name, row, format_name(to), format_name(alt));
  return alt;
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
  std::vector<TensorDecl> decls = arch.tensors(cfg);

  // Match every declared tensor to the checkpoint, with its storage format.
  std::vector<Planned> plan;
  uint64_t total_bytes = 0;
  std::map<std::string, bool> declared;
  for (const auto& d : decls) {
    declared[d.name] = true;
    const TensorInfo* t = ck.find(d.name);
    if (!t) fail("{}: tensor '{}' is missing from the checkpoint (config.json implies it)", opt.source.string(), d.name);
    if (t->shape != d.shape)
      fail("{}: tensor '{}' has shape {} but config.json implies {}", opt.source.string(), d.name,
           shape_str(t->shape), shape_str(d.shape));
    if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16)
      fail("{}: tensor '{}' has dtype {}; install supports F32, BF16 and F16 weights", opt.source.string(),
           d.name, dtype_name(t->dtype));
    TensorFormat from = format_for_dtype(t->dtype);
    TensorFormat to = storage_format(d, from, d.is_expert ? opt.expert_format : opt.trunk_format,
                                     d.is_expert ? opt.expert_fallback : opt.trunk_fallback);
    if (!can_convert(from, to) && !is_quantized(to))
      fail("tensor '{}': cannot store {} as {}", d.name, format_name(from), format_name(to));
    try {
      format_bytes(to, d.shape);  // throws if rows do not fit the block size
    } catch (const Error& e) {
      fail("tensor '{}' {}: {}; choose another format (q4_0, q8_0 have 32-element blocks)", d.name,
           shape_str(d.shape), e.what());
    }
    plan.push_back({&d, t, from, to});
    total_bytes += t->nbytes;
  }
  size_t extra = 0;
  for (const auto& name : ck.names())
    if (!declared.count(name)) {
      if (extra++ < 5) log(LogLevel::Warn, "ignoring tensor '{}' not used by {}", name, cfg.architecture);
    }
  if (extra > 5) log(LogLevel::Warn, "ignoring {} more unused tensors", extra - 5);

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
    const auto rows_per_job =
        static_cast<int64_t>(std::max<uint64_t>(1, kChunkBytes / std::max<uint64_t>({1, in_row, out_row})));
    const int64_t chunks = std::max<int64_t>(1, (rows + rows_per_job - 1) / rows_per_job);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t first = c * rows_per_job;
      const int64_t n = std::min(rows_per_job, rows - first);
      const bool last = c + 1 == chunks;
      InstallJob job;
      job.inputs.push_back(source_range(p, static_cast<uint64_t>(first) * in_row, static_cast<uint64_t>(n) * in_row));
      job.output_bytes = static_cast<uint64_t>(n) * out_row;
      job.convert = [&p, n, row](const uint8_t* in, uint8_t* out, ThreadPool& tp) {
        convert_rows(in, p.from, out, p.to, n, row, tp);
      };
      job.finish = [&m, &hashers, index, last, bytes = job.output_bytes](const uint8_t* out) {
        hashers[index]->update(out, bytes);
        if (last) m.trunk[index].checksum = hashers[index]->digest();
      };
      job.output = &trunk_out;
      job.output_offset = tt.offset + static_cast<uint64_t>(first) * out_row;
      job.progress_bytes = static_cast<uint64_t>(n) * in_row;
      source_order.push_back({p.src->file_index, job.inputs[0].offset});
      jobs.push_back(std::move(job));
    }
  }
  m.trunk_size = round_up(offset, kTrunkAlignment);

  // experts.bin: per MoE layer a fixed-stride array of 4 KiB aligned records.
  std::map<std::pair<int64_t, int64_t>, std::vector<const Planned*>> by_expert;
  for (const auto& p : plan)
    if (p.decl->is_expert) by_expert[{p.decl->layer, p.decl->expert}].push_back(&p);
  offset = 0;
  m.expert_layers.reserve(static_cast<size_t>(cfg.num_layers));  // jobs keep references to layers
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    if (!cfg.layer_is_moe(l)) continue;
    ExpertLayer layer;
    layer.layer = l;
    layer.num_experts = cfg.num_experts;
    layer.offset = round_up(offset, kExpertAlignment);
    layer.checksums.assign(static_cast<size_t>(cfg.num_experts), 0);
    m.expert_layers.push_back(std::move(layer));
    offset = m.expert_layers.back().offset;
    ExpertLayer& L = m.expert_layers.back();
    for (int64_t e = 0; e < cfg.num_experts; ++e) {
      const auto& parts = by_expert[{l, e}];
      if (parts.size() != arch.expert_sections.size())
        fail("layer {} expert {}: expected {} sections, found {}", l, e, arch.expert_sections.size(), parts.size());
      if (e == 0) {
        uint64_t so = 0;
        for (const std::string& name : arch.expert_sections) {
          auto it = std::find_if(parts.begin(), parts.end(), [&](const Planned* p) { return p->decl->section == name; });
          if (it == parts.end()) fail("layer {} expert {}: missing section '{}'", l, e, name);
          ExpertSection s{name, (*it)->to, (*it)->decl->shape, so, format_bytes((*it)->to, (*it)->decl->shape)};
          so += s.size;
          L.sections.push_back(std::move(s));
        }
        L.record_size = so;
        L.stride = round_up(so, kExpertAlignment);
      }
      // The record's sections, read in source order.
      struct Part {
        const Planned* p;
        const ExpertSection* s;
      };
      std::vector<Part> record;
      for (const ExpertSection& s : L.sections) {
        auto it = std::find_if(parts.begin(), parts.end(), [&](const Planned* p) { return p->decl->section == s.name; });
        if (it == parts.end()) fail("layer {} expert {}: missing section '{}'", l, e, s.name);
        const Planned& p = **it;
        if (p.decl->shape != s.shape)
          fail("tensor '{}': shape {} differs from expert 0's {}", p.decl->name, shape_str(p.decl->shape), shape_str(s.shape));
        if (p.to != s.format)
          fail("tensor '{}': stored as {} but expert 0 of its layer is {}", p.decl->name, format_name(p.to), format_name(s.format));
        record.push_back({&p, &s});
      }
      std::sort(record.begin(), record.end(), [](const Part& a, const Part& b) {
        return std::pair(a.p->src->file_index, a.p->src->offset) < std::pair(b.p->src->file_index, b.p->src->offset);
      });
      InstallJob job;
      for (const Part& part : record) job.inputs.push_back(source_range(*part.p, 0, part.p->src->nbytes));
      job.output_bytes = L.record_size;
      job.convert = [record](const uint8_t* in, uint8_t* out, ThreadPool& tp) {
        for (const Part& part : record) {
          const int64_t row = part.s->shape.back();
          convert_rows(in, part.p->from, out + part.s->offset, part.s->format,
                       static_cast<int64_t>(part.p->src->numel()) / row, row, tp);
          in += part.p->src->nbytes;
        }
      };
      job.finish = [&L, e](const uint8_t* out) { L.checksums[static_cast<size_t>(e)] = xxh3_64(out, L.record_size); };
      job.output = &experts_out;
      job.output_offset = L.expert_offset(e);
      for (const Part& part : record) job.progress_bytes += part.p->src->nbytes;
      source_order.push_back({record.front().p->src->file_index, record.front().p->src->offset});
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
  ThreadPool pool(threads);
  run_install_jobs(jobs, pool, progress);
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
