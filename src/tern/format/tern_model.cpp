#include "tern/format/tern_model.h"

#include <algorithm>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/hash.h"
#include "tern/core/json.h"

namespace tern {

namespace fs = std::filesystem;
using nlohmann::json;

std::string VerifyIssue::message() const {
  return fmt::format("{} at {} offset {}: {}", what, file, offset, problem);
}

TernModel TernModel::open(const fs::path& dir) {
  TernModel m;
  m.dir_ = dir;
  if (!fs::is_directory(dir)) fail("{}: not a .tern model directory", dir.string());
  fs::path manifest_path = dir / "manifest.json";
  if (!fs::exists(manifest_path))
    fail("{}: no manifest.json, so this is not a complete .tern model (an interrupted install? "
         "run `tern install` again)",
         dir.string());
  const std::string source = manifest_path.string();
  m.manifest_ = manifest_from_json(parse_json(read_text_file(manifest_path), source), source);
  m.config_ = parse_model_config(m.manifest_.config, source + " config");
  // Before anything is sized from either: the config and the tensor table agree.
  check_manifest_against_config(m.manifest_, m.config_, source);
  m.trunk_ = File::open_read(dir / m.manifest_.trunk_file);
  m.experts_ = File::open_read(dir / m.manifest_.experts_file);
  if (m.trunk_.size() != m.manifest_.trunk_size)
    fail("{}: size is {} bytes but the manifest says {} (truncated or replaced?)", m.trunk_.path(),
         m.trunk_.size(), m.manifest_.trunk_size);
  if (m.experts_.size() != m.manifest_.experts_size)
    fail("{}: size is {} bytes but the manifest says {} (truncated or replaced?)", m.experts_.path(),
         m.experts_.size(), m.manifest_.experts_size);
  return m;
}

const TrunkTensor& TernModel::trunk_tensor(const std::string& name) const {
  const TrunkTensor* t = manifest_.find_trunk(name);
  if (!t) fail("{}: trunk tensor '{}' missing from the manifest", dir_.string(), name);
  return *t;
}

void TernModel::read_trunk(const TrunkTensor& tensor, void* dst, bool verify) const {
  trunk_.pread_exact(dst, tensor.size, tensor.offset);
  if (verify) {
    uint64_t got = xxh3_64(dst, tensor.size);
    if (got != tensor.checksum)
      fail("trunk tensor '{}' at {} offset {}: checksum mismatch (expected {}, got {}); the file "
           "is corrupt, reinstall the model",
           tensor.name, trunk_.path(), tensor.offset, hash_hex(tensor.checksum), hash_hex(got));
  }
}

void TernModel::read_expert(const ExpertLayer& layer, int64_t expert, void* dst) const {
  if (expert < 0 || expert >= layer.num_experts)
    fail("expert {} out of range for layer {} ({} experts)", expert, layer.layer, layer.num_experts);
  experts_.pread_exact(dst, layer.record_size, layer.expert_offset(expert));
}

void TernModel::check_expert(const ExpertLayer& layer, int64_t expert, const void* record) const {
  uint64_t got = xxh3_64(record, layer.record_size);
  uint64_t want = layer.checksums[static_cast<size_t>(expert)];
  if (got != want)
    fail("expert (layer {}, expert {}) at {} offset {}: checksum mismatch (expected {}, got {}); "
         "the file is corrupt, reinstall the model",
         layer.layer, expert, experts_.path(), layer.expert_offset(expert), hash_hex(want), hash_hex(got));
}

uint64_t TernModel::verify_total_bytes() const {
  uint64_t n = 0;
  for (const auto& t : manifest_.trunk) n += t.size;
  for (const auto& l : manifest_.expert_layers) n += l.record_size * static_cast<uint64_t>(l.num_experts);
  for (const auto& f : manifest_.files) n += f.size;
  return n;
}

VerifyReport TernModel::verify(const std::function<void(uint64_t)>& on_bytes) const {
  VerifyReport report;
  auto progress = [&](uint64_t n) {
    report.bytes_checked += n;
    if (on_bytes) on_bytes(n);
  };
  constexpr uint64_t kChunk = 8ull << 20;
  std::vector<char> buf(kChunk);
  auto hash_range = [&](const File& f, uint64_t offset, uint64_t size) {
    Hasher h;
    for (uint64_t done = 0; done < size;) {
      uint64_t n = std::min(kChunk, size - done);
      f.pread_exact(buf.data(), n, offset + done);
      h.update(buf.data(), n);
      f.drop_cache(offset + done, n);
      done += n;
      progress(n);
    }
    return h.digest();
  };
  auto check = [&](const std::string& what, const File& f, uint64_t offset, uint64_t size, uint64_t want) {
    try {
      uint64_t got = hash_range(f, offset, size);
      if (got != want)
        report.issues.push_back({what, f.path(), offset,
                                 fmt::format("checksum mismatch (expected {}, got {})", hash_hex(want), hash_hex(got))});
    } catch (const Error& e) {
      report.issues.push_back({what, f.path(), offset, e.what()});
    }
  };
  for (const auto& t : manifest_.trunk) {
    check(fmt::format("trunk tensor '{}'", t.name), trunk_, t.offset, t.size, t.checksum);
    ++report.trunk_tensors;
  }
  for (const auto& l : manifest_.expert_layers) {
    for (int64_t e = 0; e < l.num_experts; ++e) {
      check(fmt::format("expert (layer {}, expert {})", l.layer, e), experts_, l.expert_offset(e),
            l.record_size, l.checksums[static_cast<size_t>(e)]);
      ++report.experts;
    }
  }
  for (const auto& cf : manifest_.files) {
    fs::path p = dir_ / cf.name;
    std::string what = fmt::format("file '{}'", cf.name);
    try {
      File f = File::open_read(p);
      if (f.size() != cf.size) {
        report.issues.push_back({what, p.string(), 0,
                                 fmt::format("size is {} bytes, manifest says {}", f.size(), cf.size)});
        continue;
      }
      check(what, f, 0, cf.size, cf.checksum);
    } catch (const Error& e) {
      report.issues.push_back({what, p.string(), 0, e.what()});
    }
    ++report.files;
  }
  return report;
}

ModelSummary TernModel::summary() const {
  auto numel = [](const std::vector<int64_t>& shape) {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  };
  ModelSummary s;
  for (const auto& t : manifest_.trunk) {
    s.trunk_params += numel(t.shape);
    s.trunk_bytes += t.size;
  }
  const auto k = static_cast<uint64_t>(config_.num_experts_per_tok);
  uint64_t active_expert_params = 0;
  for (const auto& l : manifest_.expert_layers) {
    uint64_t per_expert = 0;
    for (const auto& sec : l.sections) per_expert += numel(sec.shape);
    const auto e = static_cast<uint64_t>(l.num_experts);
    s.expert_params += per_expert * e;
    s.expert_bytes += l.record_size * e;
    active_expert_params += per_expert * k;
    s.expert_bytes_per_token += l.record_size * k;
  }
  s.total_params = s.trunk_params + s.expert_params;
  s.active_params = s.trunk_params + active_expert_params;
  s.moe_layers = static_cast<int64_t>(manifest_.expert_layers.size());
  s.experts_per_layer = config_.num_experts;
  s.experts_per_token = config_.num_experts_per_tok;
  return s;
}

}  // namespace tern
