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

// Random MXFP4 tensors in OpenAI's layout (TensorEncoding::Mxfp4Blocks /
// Mxfp4Scales): blocks are uniform random bytes (every E2M1 code equally
// likely), scale bytes are 127 + round(log2(1 / (sqrt(fan_in) * 3.87))) + one
// of {-1, 0, +1}, so the values have std ~1/sqrt(fan_in) like other synth
// projections (a random code has E[v^2] = 8.5625; the scale offsets
// multiply it by 1.75 on average: 3.87 = sqrt(8.5625 * 1.75)). Each stream
// depends only on (seed, tensor name), so the float layout's twin tensor
// regenerates exactly the same values.
class Mxfp4BlockStream {
 public:
  Mxfp4BlockStream(uint64_t seed, std::string_view blocks_name);
  // Draws 8 bytes at a time: calls with n % 8 == 0 give the same bytes
  // however a tensor is split into calls.
  void fill(uint8_t* dst, size_t n);

 private:
  uint64_t state_;
};

class Mxfp4ScaleStream {
 public:
  // fan_in: elements per row (32 per scale byte).
  Mxfp4ScaleStream(uint64_t seed, std::string_view scales_name, int64_t fan_in);
  void fill(uint8_t* dst, size_t n);

 private:
  uint64_t state_;
  int base_;
};

// OpenAI/Hugging Face MXFP4 decoding (docs/gpt_oss_facts.md §3): `groups`
// blocks of 16 code bytes and their scale bytes -> groups * 32 floats;
// element 32g + 2b = FP4[low nibble of byte b] * 2^(scale - 127), element
// 32g + 2b + 1 = FP4[high nibble]. Written independently of install's
// repacking, which the tests compare it with.
void dequantize_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t groups, float* out);

}  // namespace tern
