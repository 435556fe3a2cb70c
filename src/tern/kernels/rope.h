#pragma once
// Rotary position embedding in the Hugging Face "rotate_half" convention: a
// head vector is two halves [x1 | x2]; pair (x1[i], x2[i]) is rotated by the
// angle pos * inv_freq[i]:
//   out1[i] = x1[i] * cos - x2[i] * sin,   out2[i] = x2[i] * cos + x1[i] * sin.
// (Not the interleaved (x[2i], x[2i+1]) pairing of the original RoPE paper /
// GPT-J / llama.cpp GGUF-permuted weights.)
//
// Angles and their cos/sin are computed in double and rounded once to float.
// Hugging Face rounds pos * inv_freq to float32 before cos/sin; at position p
// that differs from the exact angle by up to ~p * 2^-24 rad, so the two agree
// closely at short context and this one is the more accurate at long context.
#include <cstdint>
#include <vector>

namespace tern {

// Frequency scaling of long-context variants. Only the frequencies are
// handled here; schemes that also scale attention (YaRN's mscale) report that
// through the attention scale, computed by the model.
struct RopeScaling {
  enum class Kind {
    None,
    Linear,  // position interpolation: every frequency divided by factor
    // YaRN ("rope_type": "yarn", Hugging Face _compute_yarn_parameters):
    // dims below the correction range keep their frequency, dims above it
    // are divided by factor, dims inside blend linearly; the range comes from
    // beta_fast / beta_slow rotations over original_max_positions, rounded
    // to whole dims when truncate. Attention is scaled too: see
    // rope_attention_factor.
    Yarn,
  };
  Kind kind = Kind::None;
  double factor = 1.0;
  int64_t original_max_positions = 0;  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 1.0, mscale_all_dim = 0.0;
  bool truncate = true;
};

// The factor YaRN multiplies cos and sin by (so q.k by its square):
// 0.1 ln(factor) + 1, or mscale(factor, mscale) / mscale(factor, mscale_all_dim)
// when both are set (DeepSeek); 1 for other kinds.
double rope_attention_factor(const RopeScaling& scaling);
// YaRN's mscale: 0.1 * mscale * ln(factor) + 1, or 1 when factor <= 1.
double yarn_mscale(double factor, double mscale);

// inv_freq[i] = 1 / theta^(2i / head_dim) for i < head_dim / 2, computed in
// double (then scaled) and rounded to float. head_dim must be even and > 0.
std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling = {});

// cos/sin of pos * inv_freq[i] for i < half, in double, rounded to float.
// Compute once per token position and apply to every head of every layer.
void rope_cos_sin(int64_t pos, const float* inv_freq, int64_t half, float* cos_out,
                  float* sin_out);

// Rotates one head vector of head_dim floats in place with a table from
// rope_cos_sin (head_dim / 2 entries each).
void rope_apply(float* x, int64_t head_dim, const float* cos, const float* sin);

// Rotates n_heads consecutive head vectors ([n_heads, head_dim]) in place.
void rope_apply_heads(float* x, int64_t n_heads, int64_t head_dim, const float* cos,
                      const float* sin);

// One head at one position, building the table on the fly (tests, one-offs;
// the decode loop should share a rope_cos_sin table across heads and layers).
void rope(float* x, int64_t head_dim, int64_t pos, const float* inv_freq);

}  // namespace tern
