// Fuzz target "safetensors": the input is a whole .safetensors file (u64
// header length, JSON header, data), or, when it starts with '{', a
// model.safetensors.index.json beside one valid shard
// (fuzz/data/safetensors/model-00001-of-00001.safetensors).
// Opening must either give a clean tern::Error or tensors whose byte ranges
// lie inside their file, do not overlap and match their shape x dtype;
// reading each tensor must work.
#include <algorithm>
#include <vector>

#include "fuzz_target.h"
#include "tern/format/safetensors.h"

#ifndef TERN_FUZZ_DATA_DIR
#error "TERN_FUZZ_DATA_DIR must name fuzz/data"
#endif

namespace tern::fuzz {

namespace fs = std::filesystem;

namespace {

void check_checkpoint(const SafetensorsCheckpoint& ck) {
  std::vector<char> buf;
  std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> ranges;
  for (const std::string& name : ck.names()) {
    const TensorInfo& t = ck.at(name);
    const SafetensorsFile& f = ck.shard(t.file_index);
    const uint64_t size = f.file().size();
    if (t.offset < f.data_start() || t.offset > size || t.nbytes > size - t.offset)
      broken("tensor '" + name + "' byte range lies outside its file");
    if (t.numel() * dtype_size(t.dtype) != t.nbytes) broken("tensor '" + name + "' size does not match its shape");
    buf.resize(std::min<uint64_t>(t.nbytes, 4096));
    ck.read(t, buf.data(), 0, buf.size());
    if (t.nbytes > 0) ck.read(t, buf.data(), t.nbytes - 1, 1);
    if (t.nbytes > 0) ranges.push_back({t.file_index, t.offset, t.offset + t.nbytes});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (std::get<0>(ranges[i]) == std::get<0>(ranges[i - 1]) && std::get<1>(ranges[i]) < std::get<2>(ranges[i - 1]))
      broken("two tensors' byte ranges overlap");
}

}  // namespace

void fuzz_safetensors(std::span<const uint8_t> input) {
  static const fs::path single = [] {
    fs::path d = scratch_dir() / "safetensors";
    fs::create_directories(d);
    return d;
  }();
  static const fs::path sharded = [] {
    fs::path d = scratch_dir() / "safetensors-index";
    fs::create_directories(d);
    const char* shard = "model-00001-of-00001.safetensors";
    fs::copy_file(fs::path(TERN_FUZZ_DATA_DIR) / "safetensors" / shard, d / shard, fs::copy_options::overwrite_existing);
    return d;
  }();
  const std::string_view bytes(reinterpret_cast<const char*>(input.data()), input.size());
  const bool index = !bytes.empty() && bytes[0] == '{';
  const fs::path& dir = index ? sharded : single;
  write_file(dir / (index ? "model.safetensors.index.json" : "model.safetensors"), bytes);
  run_expecting_clean_errors([&] { check_checkpoint(SafetensorsCheckpoint::open(dir)); });
}

}  // namespace tern::fuzz
