#pragma once
// Sampler — picks the next token from logits: repetition penalty, then
// temperature, top-k, top-p (nucleus) and min-p filtering, then a draw from
// a seeded generator. greedy (or temperature 0) takes the argmax (lowest id
// on ties). Deterministic for a seed.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace tern {

struct SamplerOptions {
  bool greedy = false;
  float temperature = 0.7f;
  int64_t top_k = 40;       // 0 = off
  float top_p = 0.95f;      // 1 = off
  float min_p = 0.0f;       // 0 = off; relative to the top probability
  float repetition_penalty = 1.0f;  // 1 = off; applied to tokens already in the context
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options);
  // logits may be modified. `context` holds the tokens seen so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> context);
  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace tern
