#pragma once
// Scratch — named float buffers reused across forward calls, so steady-state
// decoding does not allocate. Buffers only grow.
#include <cstdint>
#include <vector>

namespace tern {

class Scratch {
 public:
  float* get(int slot, int64_t floats) {
    if (static_cast<size_t>(slot) >= buffers_.size()) buffers_.resize(static_cast<size_t>(slot) + 1);
    auto& b = buffers_[static_cast<size_t>(slot)];
    if (b.size() < static_cast<size_t>(floats)) b.resize(static_cast<size_t>(floats));
    return b.data();
  }

 private:
  std::vector<std::vector<float>> buffers_;
};

}  // namespace tern
