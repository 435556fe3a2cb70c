#include "tern/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "tern/core/error.h"
#include "tern/core/json.h"

namespace tern {

using nlohmann::json;

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n = checked_mul(n, static_cast<uint64_t>(d), "tensor element count");
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

uint64_t TensorSpec::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n = checked_mul(n, static_cast<uint64_t>(d), "tensor size");
  return n;
}

namespace {

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses JSON and reports duplicate keys at the top level (nlohmann keeps the
// last silently, which would hide a corrupt header).
json parse_header_json(const std::string& text, const std::string& path) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
      auto key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  check_json_depth(text, path);
  json j;
  try {
    j = json::parse(text, cb);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e999
    fail("{}: safetensors header is not valid JSON: {}", path, e.what());
  }
  if (!duplicate.empty()) fail("{}: duplicate tensor name '{}' in safetensors header", path, printable(duplicate));
  if (!j.is_object()) fail("{}: safetensors header is not a JSON object", path);
  return j;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path, uint32_t file_index) {
  SafetensorsFile sf;
  sf.file_ = File::open_read(path);
  const std::string& p = sf.file_.path();
  uint64_t file_size = sf.file_.size();
  if (file_size < 8) fail("{}: file is {} bytes, too short to be safetensors (truncated?)", p, file_size);
  unsigned char len_bytes[8];
  sf.file_.pread_exact(len_bytes, 8, 0);
  uint64_t header_len = read_u64_le(len_bytes);
  if (header_len > kMaxHeaderBytes)
    fail("{}: safetensors header length {} exceeds the {} byte limit (corrupt file?)", p,
         header_len, kMaxHeaderBytes);
  if (header_len > file_size - 8)
    fail("{}: safetensors header length {} runs past the end of the {} byte file (truncated?)", p,
         header_len, file_size);
  std::string header(header_len, '\0');
  sf.file_.pread_exact(header.data(), header_len, 8);
  sf.data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - sf.data_start_;

  json j = parse_header_json(header, p);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string name = printable(it.key());  // for messages
    const json& t = it.value();
    if (!t.is_object()) fail("{}: tensor '{}': entry is not an object", p, name);
    TensorInfo info;
    info.name = it.key();
    info.file_index = file_index;
    if (!t.contains("dtype") || !t["dtype"].is_string())
      fail("{}: tensor '{}': missing dtype", p, name);
    auto dt_name = t["dtype"].get<std::string>();
    auto dt = parse_dtype(dt_name);
    if (!dt || dt_name != dtype_name(*dt))
      fail("{}: tensor '{}': unknown dtype '{}'", p, name, printable(dt_name));
    info.dtype = *dt;
    if (!t.contains("shape") || !t["shape"].is_array())
      fail("{}: tensor '{}': missing shape", p, name);
    for (const auto& d : t["shape"]) {
      // Unsigned and at most 2^53: a larger dimension cannot be a real tensor's
      // (and would turn negative as int64 when another dimension is 0).
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 53))
        fail("{}: tensor '{}': invalid shape {}", p, name, json_excerpt(t["shape"]));
      info.shape.push_back(d.get<int64_t>());
    }
    const json& off = t.value("data_offsets", json());
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be [begin, end]", p, name);
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end) fail("{}: tensor '{}': data_offsets [{}, {}] are reversed", p, name, begin, end);
    if (end > data_size)
      fail("{}: tensor '{}': byte range [{}, {}) lies outside the {} byte data section "
           "(truncated file?)",
           p, name, begin, end, data_size);
    uint64_t expected = checked_mul(info.numel(), dtype_size(info.dtype), "tensor size");
    if (expected != end - begin)
      fail("{}: tensor '{}': shape {} x {} needs {} bytes but data_offsets give {}", p, name,
           shape_str(info.shape), dt_name, expected, end - begin);
    info.offset = sf.data_start_ + begin;
    info.nbytes = end - begin;
    sf.tensors_.push_back(std::move(info));
  }
  // Overlap check over ranges sorted by start.
  std::vector<const TensorInfo*> sorted;
  for (const auto& t : sf.tensors_) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : sorted) {
    if (t->nbytes == 0) continue;
    if (prev && t->offset < prev->offset + prev->nbytes)
      fail("{}: tensors '{}' and '{}' have overlapping byte ranges", p, printable(prev->name), printable(t->name));
    prev = t;
  }
  for (size_t i = 0; i < sf.tensors_.size(); ++i) sf.by_name_[sf.tensors_[i].name] = i;
  return sf;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& input) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ck;
  if (!fs::exists(input)) fail("{}: no such file or directory", input.string());
  std::vector<fs::path> shard_paths;
  json weight_map;
  fs::path index_path;
  if (fs::is_regular_file(input)) {
    if (input.extension() == ".json") {
      index_path = input;
    } else {
      shard_paths.push_back(input);
    }
  } else if (fs::exists(input / "model.safetensors.index.json")) {
    index_path = input / "model.safetensors.index.json";
  } else if (fs::exists(input / "model.safetensors")) {
    shard_paths.push_back(input / "model.safetensors");
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json found", input.string());
  }
  if (!index_path.empty()) {
    json index = parse_json(read_text_file(index_path), index_path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: missing \"weight_map\" object", index_path.string());
    weight_map = index["weight_map"];
    std::set<std::string> files;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it.value().is_string())
        fail("{}: weight_map entry '{}' is not a file name", index_path.string(), printable(it.key()));
      auto f = it.value().get<std::string>();
      const bool control = std::any_of(f.begin(), f.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
      if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || control)
        fail("{}: weight_map entry '{}' names an invalid shard '{}'", index_path.string(), printable(it.key()), printable(f));
      files.insert(f);
    }
    for (const auto& f : files) {
      fs::path sp = index_path.parent_path() / f;
      std::error_code ec;  // a name the file system refuses (too long) is an error code, not an exception
      if (!fs::is_regular_file(sp, ec))
        fail("missing shard {}: named in {} but {}", printable(f), index_path.string(), ec ? ec.message() : "not found");
      shard_paths.push_back(sp);
    }
  }
  for (uint32_t i = 0; i < shard_paths.size(); ++i)
    ck.shards_.push_back(SafetensorsFile::open(shard_paths[i], i));

  if (!index_path.empty()) {
    std::map<std::string, uint32_t> shard_by_file;
    for (uint32_t i = 0; i < shard_paths.size(); ++i)
      shard_by_file[shard_paths[i].filename().string()] = i;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      uint32_t s = shard_by_file.at(it.value().get<std::string>());
      const TensorInfo* t = ck.shards_[s].find(it.key());
      if (!t)
        fail("tensor '{}' is named in {} as stored in {} but that shard does not contain it",
             printable(it.key()), index_path.string(), ck.shards_[s].path());
      ck.by_name_[it.key()] = t;
    }
  } else {
    for (const auto& t : ck.shards_[0].tensors()) ck.by_name_[t.name] = &t;
  }
  for (const auto& [name, _] : ck.by_name_) ck.names_.push_back(name);
  return ck;
}

void SafetensorsCheckpoint::rename_prefix(const std::string& from, const std::string& to) {
  std::map<std::string, const TensorInfo*> renamed;
  for (const auto& [name, t] : by_name_) {
    const std::string key = name.starts_with(from) ? to + name.substr(from.size()) : name;
    if (!renamed.emplace(key, t).second)
      fail("checkpoint has both '{}' and '{}{}'; read as the same tensor", printable(key), printable(from),
           printable(key.substr(to.size())));
  }
  by_name_ = std::move(renamed);
  names_.clear();
  for (const auto& [name, _] : by_name_) names_.push_back(name);
}

const TensorInfo* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& SafetensorsCheckpoint::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("tensor '{}' not found in checkpoint", printable(name));
  return *t;
}

uint64_t SafetensorsCheckpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [_, t] : by_name_) n += t->nbytes;
  return n;
}

void SafetensorsCheckpoint::read(const TensorInfo& tensor, void* dst, uint64_t begin,
                                 uint64_t length) const {
  if (length == ~0ull) length = tensor.nbytes - std::min(begin, tensor.nbytes);
  if (begin > tensor.nbytes || length > tensor.nbytes - begin)
    fail("read of [{}, +{}) outside tensor '{}' ({} bytes)", begin, length, printable(tensor.name), tensor.nbytes);
  shards_[tensor.file_index].file().pread_exact(dst, length, tensor.offset + begin);
}

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : file_(File::create(path)), tensors_(std::move(tensors)) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors_) {
    if (!names.insert(t.name).second) fail("duplicate tensor name '{}'", t.name);
    uint64_t n = t.nbytes();
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  expected_total_ = offset;
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.resize(round_up(text.size(), 8), ' ');
  unsigned char len[8];
  uint64_t hl = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(hl >> (8 * i));
  file_.write_all(len, 8);
  file_.write_all(text.data(), text.size());
  header_end_ = 8 + hl;
}

void SafetensorsWriter::write(const void* data, size_t n) {
  if (written_ + n > expected_total_)
    fail("{}: writing {} bytes past the declared tensors' size", file_.path(), n);
  file_.write_all(data, n);
  written_ += n;
}

void SafetensorsWriter::finish() {
  if (written_ != expected_total_)
    fail("{}: wrote {} of {} declared bytes", file_.path(), written_, expected_total_);
  file_.sync();
  file_.drop_cache(0, header_end_ + written_);
  file_.close();
}

}  // namespace tern
