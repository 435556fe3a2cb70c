#pragma once
// TrunkWeights — the resident tensors of a model: trunk.bin read once into
// memory (each tensor's checksum verified), matrices served as WeightViews in
// their storage format, 1-D tensors (norms, biases) as F32 copies.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tern/core/aligned_buffer.h"
#include "tern/format/tern_model.h"
#include "tern/kernels/weight_view.h"

namespace tern {

class TrunkWeights {
 public:
  explicit TrunkWeights(const TernModel& model, bool verify = true);

  bool has(const std::string& name) const;
  // A 2-D tensor [rows, cols]; throws naming the tensor if absent or not 2-D.
  WeightView matrix(const std::string& name) const;
  // A tensor that is not 2-D (a vector; conv taps) as F32, flattened
  // (converted once at load).
  const float* vector(const std::string& name) const;
  uint64_t resident_bytes() const { return data_.size(); }

 private:
  const TernModel& model_;
  AlignedBuffer data_;
  std::map<std::string, std::vector<float>> vectors_;
};

}  // namespace tern
