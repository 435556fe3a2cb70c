#pragma once
// Sampler — picks the next token from logits: repetition penalty, OpenAI's
// presence/frequency penalties, then
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
  // OpenAI's penalties, over the tokens this sampler has drawn so far (the
  // completion, not the prompt): logit -= frequency * count + presence * (count > 0).
  float presence_penalty = 0.0f;   // 0 = off, in [-2, 2]
  float frequency_penalty = 0.0f;  // 0 = off, in [-2, 2]
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options);
  // logits may be modified. `context` holds the tokens seen so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> context);
  const SamplerOptions& options() const { return options_; }

 private:
  int32_t draw(std::span<float> logits, std::span<const int32_t> context);
  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<std::pair<int32_t, int32_t>> drawn_;  // (token, times drawn), for the OpenAI penalties
};

int32_t argmax(std::span<const float> logits);

}  // namespace tern
