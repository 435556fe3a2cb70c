#pragma once
// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2), run in the latent
// space. Per token:
//   q      = q_b(rmsnorm(q_a x)) (or q_proj x), per head [q_nope | q_pe]
//   [c | k_pe] = kv_a x;  c = rmsnorm(c)       one latent of kv_lora_rank
//                                              floats and one rope key for
//                                              all heads
//   kv_b c = per head [k_nope | v]             (never formed: absorbed)
// The cache keeps [c | rotated k_pe] per position (kv_lora_rank +
// qk_rope_head_dim floats, instead of heads x (nope + rope + v)), and decode
// attends in the latent space: the key part of kv_b is absorbed into the
// query (q_lat = W_UK^T q_nope, so q_lat . c = q_nope . k_nope) and its
// value part applied after the softmax (v = W_UV (sum p c)), which is the
// same attention as expanding every cached position, up to float rounding.
// With rope_interleave the rope dims are paired (2i, 2i + 1): they are
// de-interleaved, then rotated as rotate_half pairs (transformers'
// apply_rotary_pos_emb_interleave), in q and k alike. YaRN's attention
// factor multiplies the rotated dims (as transformers multiplies cos and sin).
#include <cstdint>
#include <span>

#include "tern/kernels/weight_view.h"
#include "tern/models/attention_block.h"
#include "tern/models/scratch.h"

namespace tern {

class ThreadPool;

struct MlaWeights {
  WeightView q;  // q_proj [heads * (nope + rope), hidden], used when q_a is null
  WeightView q_a, q_b;  // [q_lora_rank, hidden], [heads * (nope + rope), q_lora_rank]
  const float* q_a_bias = nullptr;
  const float* q_a_norm = nullptr;  // [q_lora_rank]
  WeightView kv_a;                  // kv_a_proj_with_mqa [kv_lora_rank + rope, hidden]
  const float* kv_a_bias = nullptr;
  const float* kv_a_norm = nullptr;  // [kv_lora_rank]
  WeightView kv_b;                   // [heads * (nope + v), kv_lora_rank]
  WeightView o;                      // [hidden, heads * v]
  const float* o_bias = nullptr;
  bool present() const { return kv_a.data != nullptr; }
};

struct MlaShape {
  int64_t hidden = 0, n_heads = 0;
  int64_t kv_lora_rank = 0, nope = 0, rope = 0, v = 0;
  // q_a_layernorm's and kv_a_layernorm's epsilon: transformers builds them
  // with the RMSNorm default 1e-6 whatever rms_norm_eps says.
  float latent_norm_eps = 1e-6f;
  float scale = 0;                       // softmax scale: (nope + rope)^-1/2, times YaRN's mscale^2
  const float* rope_inv_freq = nullptr;  // [rope / 2]
  float rope_factor = 1.0f;              // YaRN's attention factor on the rotated dims
  bool rope_interleave = true;
};

// x: [n, hidden] normalised inputs of tokens at `slots` (a sequence's tokens
// in order); appends each token's latent at `layer` before it attends;
// out: [n, hidden].
void mla_attention_forward(const MlaWeights& w, const MlaShape& s, const float* x, std::span<const TokenSlot> slots,
                           int64_t layer, float* out, Scratch& scratch, ThreadPool* pool);

}  // namespace tern
