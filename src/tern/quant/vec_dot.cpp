// Portable dot products of quantized weight rows (see vec_dot.h for the
// summation order each one follows).
#include "tern/quant/quant_internal.h"  // first: sets the float mode

#include "tern/quant/vec_dot.h"

#include <cmath>

#include "tern/quant/quantize.h"

namespace tern {

using namespace quant_detail;

float vec_dot_q8_0_q8(int64_t n, const void* w_blocks, const void* act_blocks) {
  check_row_length(n, kQK8_0, "q8_0");
  const auto* w = static_cast<const BlockQ8_0*>(w_blocks);
  const auto* a = static_cast<const BlockQ8_0*>(act_blocks);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += w[b].qs[j] * a[b].qs[j];
    acc += static_cast<float>(isum) * (load_f16(w[b].d) * load_f16(a[b].d));
  }
  return acc;
}

float vec_dot_q4_0_q8(int64_t n, const void* w_blocks, const void* act_blocks) {
  check_row_length(n, kQK4_0, "q4_0");
  const auto* w = static_cast<const BlockQ4_0*>(w_blocks);
  const auto* a = static_cast<const BlockQ8_0*>(act_blocks);
  constexpr int kHalf = kQK4_0 / 2;
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      isum += ((w[b].qs[j] & 0x0F) - 8) * a[b].qs[j];
      isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + kHalf];
    }
    acc += static_cast<float>(isum) * load_f16(w[b].d) * load_f16(a[b].d);
  }
  return acc;
}

float vec_dot_mxfp4_q8(int64_t n, const void* w_blocks, const void* act_blocks) {
  check_row_length(n, kQKMxfp4, "mxfp4");
  static_assert(kQKMxfp4 == kQK8_0, "MXFP4 pairs with Q8_0 activations block for block");
  const auto* w = static_cast<const BlockMxfp4*>(w_blocks);
  const auto* a = static_cast<const BlockQ8_0*>(act_blocks);
  constexpr int kHalf = kQKMxfp4 / 2;
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQKMxfp4; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      isum += kMxfp4Values[w[b].qs[j] & 0x0F] * a[b].qs[j];
      isum += kMxfp4Values[w[b].qs[j] >> 4] * a[b].qs[j + kHalf];
    }
    const float d = load_f16(a[b].d) * e8m0_to_float_half(w[b].e);
    acc += d * static_cast<float>(isum);
  }
  return acc;
}

float vec_dot_q4_k_q8(int64_t n, const void* w_blocks, const void* act_blocks) {
  check_row_length(n, kQK_K, "q4_k");
  const auto* w = static_cast<const BlockQ4K*>(w_blocks);
  const auto* a = static_cast<const BlockQ8K*>(act_blocks);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;
    int32_t imin = 0;
    for (int s = 0; s < kQK_K / 32; ++s) {  // sub-block s: elements 32s .. 32s + 31
      uint8_t sc, m;
      q4_k_scale_min(s, w[b].scales, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);  // even sub-blocks in the low nibbles, odd in the high
      const int8_t* qa = a[b].qs + 32 * s;
      int32_t sub = 0;
      for (int l = 0; l < 32; ++l) sub += ((q[l] >> shift) & 0xF) * qa[l];
      isum += sc * sub;
      imin += m * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
    }
    acc += (load_f16(w[b].d) * a[b].d) * static_cast<float>(isum);
    acc -= (load_f16(w[b].dmin) * a[b].d) * static_cast<float>(imin);
  }
  return acc;
}

float vec_dot_q6_k_q8(int64_t n, const void* w_blocks, const void* act_blocks) {
  check_row_length(n, kQK_K, "q6_k");
  const auto* w = static_cast<const BlockQ6K*>(w_blocks);
  const auto* a = static_cast<const BlockQ8K*>(act_blocks);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;
    for (int s = 0; s < kQK_K / 16; ++s) {  // sub-block s: elements 16s .. 16s + 15
      int32_t sub = 0;
      for (int k = 0; k < 16; ++k) {
        const int j = 16 * s + k;
        const int h = j / 128, t = (j % 128) / 32, l = j % 32;
        const uint8_t lo = w[b].ql[64 * h + 32 * (t % 2) + l];
        const int low4 = t < 2 ? (lo & 0xF) : (lo >> 4);
        const int high2 = (w[b].qh[32 * h + l] >> (2 * t)) & 3;
        sub += ((low4 | (high2 << 4)) - 32) * a[b].qs[j];
      }
      isum += w[b].scales[s] * sub;
    }
    acc += (load_f16(w[b].d) * a[b].d) * static_cast<float>(isum);
  }
  return acc;
}

namespace {

// Dequantizes each block of `Block` with `dequant`, then fma in row order.
template <class Block, int kBlock>
float dot_dequantized(int64_t n, const void* w_blocks, const float* x, const char* name,
                      void (*dequant)(const void*, float*, int64_t)) {
  check_row_length(n, kBlock, name);
  const auto* w = static_cast<const Block*>(w_blocks);
  float buf[kBlock];
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    dequant(&w[b], buf, kBlock);
    for (int j = 0; j < kBlock; ++j) acc = std::fma(buf[j], x[j], acc);
  }
  return acc;
}

}  // namespace

float vec_dot_q8_0_f32(int64_t n, const void* w_blocks, const float* x) {
  return dot_dequantized<BlockQ8_0, kQK8_0>(n, w_blocks, x, "q8_0", dequantize_row_q8_0);
}
float vec_dot_q4_0_f32(int64_t n, const void* w_blocks, const float* x) {
  return dot_dequantized<BlockQ4_0, kQK4_0>(n, w_blocks, x, "q4_0", dequantize_row_q4_0);
}
float vec_dot_mxfp4_f32(int64_t n, const void* w_blocks, const float* x) {
  return dot_dequantized<BlockMxfp4, kQKMxfp4>(n, w_blocks, x, "mxfp4", dequantize_row_mxfp4);
}
float vec_dot_q4_k_f32(int64_t n, const void* w_blocks, const float* x) {
  return dot_dequantized<BlockQ4K, kQK_K>(n, w_blocks, x, "q4_k", dequantize_row_q4_k);
}
float vec_dot_q6_k_f32(int64_t n, const void* w_blocks, const float* x) {
  return dot_dequantized<BlockQ6K, kQK_K>(n, w_blocks, x, "q6_k", dequantize_row_q6_k);
}

ActivationFormat activation_format(TensorFormat weight_format) {
  switch (weight_format) {
    case TensorFormat::Q8_0:
    case TensorFormat::Q4_0:
    case TensorFormat::MXFP4:
      return ActivationFormat::Q8_0;
    case TensorFormat::Q4_K:
    case TensorFormat::Q6_K:
      return ActivationFormat::Q8_K;
    default:
      fail("format '{}' has no quantized-activation dot product", format_name(weight_format));
  }
}

int64_t activation_bytes(TensorFormat weight_format, int64_t n) {
  if (activation_format(weight_format) == ActivationFormat::Q8_0) {
    check_row_length(n, kQK8_0, "q8_0");
    return n / kQK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0));
  }
  check_row_length(n, kQK_K, "q8_k");
  return n / kQK_K * static_cast<int64_t>(sizeof(BlockQ8K));
}

void quantize_activation(TensorFormat weight_format, const float* x, void* act, int64_t n) {
  if (activation_format(weight_format) == ActivationFormat::Q8_0)
    quantize_row_q8_0(x, act, n);
  else
    quantize_row_q8_k(x, act, n);
}

float vec_dot_q8(TensorFormat weight_format, int64_t n, const void* w_blocks,
                 const void* act_blocks) {
  switch (weight_format) {
    case TensorFormat::Q8_0:
      return vec_dot_q8_0_q8(n, w_blocks, act_blocks);
    case TensorFormat::Q4_0:
      return vec_dot_q4_0_q8(n, w_blocks, act_blocks);
    case TensorFormat::MXFP4:
      return vec_dot_mxfp4_q8(n, w_blocks, act_blocks);
    case TensorFormat::Q4_K:
      return vec_dot_q4_k_q8(n, w_blocks, act_blocks);
    case TensorFormat::Q6_K:
      return vec_dot_q6_k_q8(n, w_blocks, act_blocks);
    default:
      fail("vec_dot_q8: format '{}' is not quantized", format_name(weight_format));
  }
}

float vec_dot_f32(TensorFormat weight_format, int64_t n, const void* w_blocks, const float* x) {
  switch (weight_format) {
    case TensorFormat::Q8_0:
      return vec_dot_q8_0_f32(n, w_blocks, x);
    case TensorFormat::Q4_0:
      return vec_dot_q4_0_f32(n, w_blocks, x);
    case TensorFormat::MXFP4:
      return vec_dot_mxfp4_f32(n, w_blocks, x);
    case TensorFormat::Q4_K:
      return vec_dot_q4_k_f32(n, w_blocks, x);
    case TensorFormat::Q6_K:
      return vec_dot_q6_k_f32(n, w_blocks, x);
    default:
      fail("vec_dot_f32: format '{}' is not quantized", format_name(weight_format));
  }
}

}  // namespace tern
