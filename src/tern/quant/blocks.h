#pragma once
// Byte layouts of the block-quantized formats, identical to ggml's
// (ggml/src/ggml-common.h), so a row of these structs is exactly the bytes a
// GGUF file stores. All multi-byte fields are little-endian (x86/ARM native);
// scales are IEEE binary16 bit patterns. Plain structs of bytes: no padding,
// alignment 1 or 2, copied with memcpy.
//
// Element order inside a block (how element j of the block is found):
//   Q8_0   qs[j]
//   Q4_0   j < 16: low nibble of qs[j];  j >= 16: high nibble of qs[j - 16].
//          value = (nibble - 8) * d
//   MXFP4  same nibble order as Q4_0; value = kMxfp4Values[nibble] * 2^(e - 128)
//          (the table holds the E2M1 values doubled, hence 2^(e-128), not 2^(e-127))
//   Q4_K   8 sub-blocks of 32 with a 6-bit scale sc and 6-bit min m each (packed
//          in scales[12], see q4_k_scale_min); element j: chunk c = j / 64,
//          l = j % 32, nibble = j % 64 < 32 ? low(qs[32c + l]) : high(qs[32c + l]);
//          value = d * sc[j / 32] * nibble - dmin * m[j / 32]
//   Q6_K   16 sub-blocks of 16 with an int8 scale each; element j: half h = j / 128,
//          r = j % 128, quarter t = r / 32, l = r % 32;
//          low 4 bits: byte ql[64h + 32(t % 2) + l], low nibble for t < 2, high for t >= 2;
//          high 2 bits: (qh[32h + l] >> 2t) & 3;
//          value = d * scales[j / 16] * (q6 - 32)
//   Q8_K   qs[j]; bsums[g] = sum of qs[16g .. 16g+15]; value = d * qs[j] (d is f32)
#include <cstddef>
#include <cstdint>

namespace tern {

inline constexpr int kQK8_0 = 32;    // elements per Q8_0 block
inline constexpr int kQK4_0 = 32;    // elements per Q4_0 block
inline constexpr int kQKMxfp4 = 32;  // elements per MXFP4 block
inline constexpr int kQK_K = 256;    // elements per K-quant super-block (Q4_K, Q6_K, Q8_K)

// Q8_0: 32 weights, value = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};

// Q4_0: 32 weights, value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;              // f16 scale
  uint8_t qs[kQK4_0 / 2];  // element j in the low nibble of qs[j], j + 16 in the high one
};

// MXFP4 (OCP microscaling FP4): 32 weights sharing a power-of-two scale.
struct BlockMxfp4 {
  uint8_t e;                 // E8M0 biased exponent
  uint8_t qs[kQKMxfp4 / 2];  // E2M1 codes, nibble order as Q4_0
};

// Q4_K: 256 weights in 8 sub-blocks of 32, each with a 6-bit scale and min.
struct BlockQ4K {
  uint16_t d;             // f16 super-scale of the sub-block scales
  uint16_t dmin;          // f16 super-scale of the sub-block mins
  uint8_t scales[12];     // 8 x (6-bit scale, 6-bit min), packed as ggml
  uint8_t qs[kQK_K / 2];  // 4-bit codes
};

// Q6_K: 256 weights in 16 sub-blocks of 16, each with an int8 scale.
struct BlockQ6K {
  uint8_t ql[kQK_K / 2];      // low 4 bits of the 6-bit codes
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // sub-block scales
  uint16_t d;                 // f16 super-scale
};

// Q8_K: ggml's activation format for dot products with K-quant weights.
// Never stored in files; d is a plain float.
struct BlockQ8K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of groups of 16 quants
};

static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes in GGUF");
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes in GGUF");
static_assert(sizeof(BlockMxfp4) == 17, "block_mxfp4 is 17 bytes in GGUF");
static_assert(sizeof(BlockQ4K) == 144, "block_q4_K is 144 bytes in GGUF");
static_assert(sizeof(BlockQ6K) == 210, "block_q6_K is 210 bytes in GGUF");
static_assert(sizeof(BlockQ8K) == 292, "block_q8_K is 292 bytes in ggml");
static_assert(offsetof(BlockQ6K, d) == 208, "block_q6_K stores d last");

// The E2M1 values doubled (ggml's kvalues_mxfp4): code -> 2 * value.
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The 6-bit scale and min of Q4_K sub-block j (0..7) from the packed bytes:
// j < 4: low 6 bits of scales[j] and scales[j + 4]; j >= 4: low/high nibble of
// scales[j + 4] plus the top 2 bits of scales[j - 4] / scales[j].
inline void q4_k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace tern
