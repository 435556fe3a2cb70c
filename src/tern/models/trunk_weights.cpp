#include "tern/models/trunk_weights.h"

#include "tern/core/error.h"
#include "tern/core/hash.h"

namespace tern {

TrunkWeights::TrunkWeights(const TernModel& model, bool verify) : model_(model) {
  const Manifest& m = model.manifest();
  data_ = AlignedBuffer(m.trunk_size, 64);
  constexpr uint64_t kChunk = 64ull << 20;
  for (uint64_t off = 0; off < m.trunk_size; off += kChunk) {
    uint64_t n = std::min(kChunk, m.trunk_size - off);
    model.trunk_file().pread_exact(data_.data() + off, n, off);
    model.trunk_file().drop_cache(off, n);
  }
  for (const auto& t : m.trunk) {
    const uint8_t* p = data_.data() + t.offset;
    if (verify) {
      uint64_t got = xxh3_64(p, t.size);
      if (got != t.checksum)
        fail("trunk tensor '{}' at {} offset {}: checksum mismatch (expected {}, got {}); the file is "
             "corrupt, reinstall the model",
             t.name, model.trunk_file().path(), t.offset, hash_hex(t.checksum), hash_hex(got));
    }
    if (t.shape.size() != 2) {  // vectors, and conv taps [channels, 1, kernel] flattened
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      std::vector<float> v(static_cast<size_t>(n));
      convert_elements(p, t.format, v.data(), TensorFormat::F32, v.size());
      vectors_[t.name] = std::move(v);
    }
  }
}

bool TrunkWeights::has(const std::string& name) const { return model_.manifest().find_trunk(name) != nullptr; }

WeightView TrunkWeights::matrix(const std::string& name) const {
  const TrunkTensor& t = model_.trunk_tensor(name);
  if (t.shape.size() != 2) fail("trunk tensor '{}' is not a matrix", name);
  return WeightView{data_.data() + t.offset, t.format, t.shape[0], t.shape[1]};
}

const float* TrunkWeights::vector(const std::string& name) const {
  auto it = vectors_.find(name);
  if (it == vectors_.end()) fail("trunk tensor '{}' is missing or not a vector", name);
  return it->second.data();
}

}  // namespace tern
