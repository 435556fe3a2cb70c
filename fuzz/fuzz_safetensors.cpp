// Fuzz target "safetensors": the input is a whole .safetensors file (u64
// header length, JSON header, data). Opening it must either give a clean
// tern::Error or tensors whose byte ranges lie inside the file, do not
// overlap and match their shape x dtype; reading each tensor must work.
#include <algorithm>
#include <vector>

#include "fuzz_target.h"
#include "tern/format/safetensors.h"

namespace tern::fuzz {

void fuzz_safetensors(std::span<const uint8_t> input) {
  const auto dir = scratch_dir() / "safetensors";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  write_file(dir / "model.safetensors", {reinterpret_cast<const char*>(input.data()), input.size()});
  run_expecting_clean_errors([&] {
    SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir);
    const SafetensorsFile& f = ck.shard(0);
    std::vector<char> buf;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const std::string& name : ck.names()) {
      const TensorInfo& t = ck.at(name);
      if (t.offset < f.data_start() || t.offset > input.size() || t.nbytes > input.size() - t.offset)
        broken("tensor '" + name + "' byte range lies outside the file");
      if (t.numel() * dtype_size(t.dtype) != t.nbytes) broken("tensor '" + name + "' size does not match its shape");
      buf.resize(std::min<uint64_t>(t.nbytes, 4096));
      ck.read(t, buf.data(), 0, buf.size());
      if (t.nbytes > 0) ck.read(t, buf.data(), t.nbytes - 1, 1);
      if (t.nbytes > 0) ranges.push_back({t.offset, t.offset + t.nbytes});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second) broken("two tensors' byte ranges overlap");
  });
}

}  // namespace tern::fuzz
