#include "tern/install/installer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/hash.h"
#include "tern/core/log.h"
#include "tern/core/progress.h"
#include "tern/format/architectures.h"
#include "tern/format/safetensors.h"
#include "tern/quant/quantize.h"

namespace tern {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Files copied verbatim when present (config.json is required).
constexpr const char* kCopiedFiles[] = {
    "config.json",        "generation_config.json", "tokenizer.json",     "tokenizer_config.json",
    "special_tokens_map.json", "chat_template.jinja", "chat_template.json"};

constexpr uint64_t kChunkBytes = 8ull << 20;
constexpr uint64_t kFlushBytes = 64ull << 20;

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

// Sequential writer over a File that periodically flushes and drops pages.
class OutputStream {
 public:
  explicit OutputStream(File& file) : file_(file) {}
  void pwrite(const void* data, uint64_t n, uint64_t offset) {
    file_.pwrite_all(data, n, offset);
    pending_ += n;
    end_ = std::max(end_, offset + n);
    if (pending_ >= kFlushBytes) flush();
  }
  void flush() {
    file_.flush_and_drop(0, end_);
    pending_ = 0;
  }
  uint64_t end() const { return end_; }

 private:
  File& file_;
  uint64_t pending_ = 0;
  uint64_t end_ = 0;
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

// Reads `n` elements (whole rows of `row` elements) of a source tensor
// starting at element `first` and writes them in the target format to dst.
void read_converted(const SafetensorsCheckpoint& ck, const Planned& p, uint64_t first, uint64_t n,
                    std::vector<char>& scratch, std::vector<float>& rows_f32, void* dst) {
  const uint64_t es = dtype_size(p.src->dtype);
  if (p.from == p.to) {
    ck.read(*p.src, dst, first * es, n * es);
  } else {
    scratch.resize(n * es);
    ck.read(*p.src, scratch.data(), first * es, n * es);
    if (!is_quantized(p.to)) {
      convert_elements(scratch.data(), p.from, dst, p.to, n);
    } else {
      const auto row = static_cast<int64_t>(p.decl->shape.back());
      rows_f32.resize(n);
      convert_elements(scratch.data(), p.from, rows_f32.data(), TensorFormat::F32, n);
      const int64_t rb = row_bytes(p.to, row);
      for (uint64_t r = 0; r < n / static_cast<uint64_t>(row); ++r)
        quantize_row(p.to, rows_f32.data() + r * static_cast<uint64_t>(row), static_cast<char*>(dst) + static_cast<int64_t>(r) * rb, row);
    }
  }
  ck.shard(p.src->file_index).file().drop_cache(p.src->offset + first * es, n * es);
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
  std::vector<char> buf, scratch;
  std::vector<float> rows_f32;

  // trunk.bin: trunk tensors in declaration order, 64-byte aligned.
  {
    File out = File::create(guard.path / m.trunk_file);
    OutputStream stream(out);
    uint64_t offset = 0;
    for (const auto& p : plan) {
      if (p.decl->is_expert) continue;
      TrunkTensor tt{p.decl->name, p.to, p.decl->shape, round_up(offset, kTrunkAlignment), 0, 0};
      tt.size = format_bytes(p.to, p.decl->shape);
      const uint64_t numel = p.src->numel();
      const uint64_t row = p.decl->shape.empty() ? 1 : static_cast<uint64_t>(p.decl->shape.back());
      const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / (row * 4));
      Hasher h;
      uint64_t out_off = tt.offset;
      for (uint64_t first = 0; first < numel; first += rows_per_chunk * row) {
        uint64_t n = std::min(rows_per_chunk * row, numel - first);
        buf.resize(format_bytes(p.to, {static_cast<int64_t>(n)}));
        read_converted(ck, p, first, n, scratch, rows_f32, buf.data());
        h.update(buf.data(), buf.size());
        stream.pwrite(buf.data(), buf.size(), out_off);
        out_off += buf.size();
        progress.add(n * dtype_size(p.src->dtype));
      }
      tt.checksum = h.digest();
      offset = tt.offset + tt.size;
      m.trunk.push_back(std::move(tt));
    }
    m.trunk_size = round_up(offset, kTrunkAlignment);
    out.truncate(m.trunk_size);
    stream.flush();
    out.sync();
  }

  // experts.bin: per MoE layer a fixed-stride array of 4 KiB aligned records.
  {
    File out = File::create(guard.path / m.experts_file);
    OutputStream stream(out);
    std::map<std::pair<int64_t, int64_t>, std::vector<const Planned*>> by_expert;
    for (const auto& p : plan)
      if (p.decl->is_expert) by_expert[{p.decl->layer, p.decl->expert}].push_back(&p);
    uint64_t offset = 0;
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
      if (!cfg.layer_is_moe(l)) continue;
      ExpertLayer layer;
      layer.layer = l;
      layer.num_experts = cfg.num_experts;
      layer.offset = round_up(offset, kExpertAlignment);
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
            layer.sections.push_back(std::move(s));
          }
          layer.record_size = so;
          layer.stride = round_up(so, kExpertAlignment);
        }
        buf.assign(layer.record_size, 0);
        for (const ExpertSection& s : layer.sections) {
          auto it = std::find_if(parts.begin(), parts.end(), [&](const Planned* p) { return p->decl->section == s.name; });
          if (it == parts.end()) fail("layer {} expert {}: missing section '{}'", l, e, s.name);
          Planned p = **it;
          if (p.decl->shape != s.shape)
            fail("tensor '{}': shape {} differs from expert 0's {}", p.decl->name, shape_str(p.decl->shape), shape_str(s.shape));
          p.to = s.format;  // every expert of a layer shares expert 0's format
          if (!can_convert(p.from, p.to) && !is_quantized(p.to))
            fail("tensor '{}': cannot store {} as {}", p.decl->name, format_name(p.from), format_name(p.to));
          read_converted(ck, p, 0, p.src->numel(), scratch, rows_f32, buf.data() + s.offset);
          progress.add(p.src->nbytes);
        }
        layer.checksums.push_back(xxh3_64(buf.data(), layer.record_size));
        stream.pwrite(buf.data(), layer.record_size, layer.expert_offset(e));
      }
      offset = layer.expert_offset(layer.num_experts - 1) + layer.stride;
      m.expert_layers.push_back(std::move(layer));
    }
    m.experts_size = round_up(offset, kExpertAlignment);
    out.truncate(m.experts_size);
    stream.flush();
    out.sync();
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
