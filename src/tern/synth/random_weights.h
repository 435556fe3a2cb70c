#pragma once
// Deterministic random tensor values for synthetic models: each tensor's
// stream depends only on (seed, tensor name), so the bytes do not change with
// sharding or chunk size. Uniform values with the standard deviation each
// WeightInit asks for keep activations finite through every layer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/core/dtype.h"
#include "tern/format/architectures.h"

namespace tern {

class WeightStream {
 public:
  // fan_in: the input width of a projection (last dimension).
  WeightStream(uint64_t seed, std::string_view tensor_name, WeightInit init, int64_t fan_in);
  // Fills the next n values, encoded as dtype (F32, BF16 or F16).
  void fill(void* dst, size_t n, DType dtype);

 private:
  float next();
  uint64_t state_;
  float center_;
  float half_width_;
};

}  // namespace tern
