// AVX2 kernels for block-quantized weights (Q8_0, Q4_0, MXFP4, Q4_K, Q6_K)
// against 8-bit activations. Bit-identical to the portable path (quant's
// vec_dot_*_q8), see quant_kernels.h:
//  - a tile is 8 weight rows, one per lane of a float register, times a few
//    tokens; each lane adds its row's blocks in order with exactly the
//    scalar reference's float operations (multiply, round, add: no fusing);
//  - the integer sum of a (row, token, block) is exact whatever the order:
//    vpmaddubsw products never saturate for these code ranges (noted per
//    format), the rest is int32 adds; 8 rows' partial sums are reduced
//    together (reduce8), one horizontal add tree per block for 8 rows.
// Unsigned codes (4-bit nibbles, MXFP4 values + 12, 6-bit codes) go straight
// into vpmaddubsw; the code offset (8, 12, 32) is taken out once per block
// through the activation block's code sum, which is exact in integers:
// sum((c - k) a) = sum(c a) - k sum(a).
#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/quant_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tern/core/error.h"
#include "tern/quant/blocks.h"

namespace tern::detail {

#define TERN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace {

// Tokens whose accumulators a batch tile keeps (in memory); more tokens are
// taken in further token blocks.
constexpr int kMaxTileTokens = 32;

// Rows of a tile: one per lane of a float register.
constexpr int64_t kTileRows = 8;

// Software prefetch runs this many tiles ahead (see prefetch_next).
constexpr int64_t kPrefetchTiles = 2;

// The 8 rows of a tile. Rows past the end of a ragged last tile repeat its
// last row (computed, never stored), so every tile runs the same code.
struct TileRows {
  const uint8_t* row[8];
  const uint8_t* next;  // first row of the tile to prefetch (a later one of this thread)
  int64_t stride;
  int n_next;  // rows of the next tile to prefetch
  int n_rows;  // valid rows, 1..8
};

TERN_AVX2 inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The f16 at byte `off` of each row, as 8 floats (lane r = row r). Exact.
TERN_AVX2 inline __m256 gather_f16(const TileRows& t, int64_t off) {
  __m128i v = _mm_cvtsi32_si128(load_u16(t.row[0] + off));
  v = _mm_insert_epi16(v, load_u16(t.row[1] + off), 1);
  v = _mm_insert_epi16(v, load_u16(t.row[2] + off), 2);
  v = _mm_insert_epi16(v, load_u16(t.row[3] + off), 3);
  v = _mm_insert_epi16(v, load_u16(t.row[4] + off), 4);
  v = _mm_insert_epi16(v, load_u16(t.row[5] + off), 5);
  v = _mm_insert_epi16(v, load_u16(t.row[6] + off), 6);
  v = _mm_insert_epi16(v, load_u16(t.row[7] + off), 7);
  return _mm256_cvtph_ps(v);
}

// Lane r = the sum of the 8 int32 lanes of p[r]. Exact (sums fit int32).
// A transpose-and-add tree made mostly of blends, which run on every vector
// pipe, with one in-lane shuffle per pair instead of vphaddd's two.
TERN_AVX2 inline __m256i add_pairs(__m256i a, __m256i b) {  // lane 2k: a's pair k, 2k+1: b's
  __m256i x = _mm256_blend_epi32(a, b, 0xAA), y = _mm256_blend_epi32(b, a, 0xAA);
  return _mm256_add_epi32(x, _mm256_shuffle_epi32(y, _MM_SHUFFLE(2, 3, 0, 1)));
}
TERN_AVX2 inline __m256i add_quads(__m256i a, __m256i b) {  // lanes 0,1 from a, 2,3 from b (per half)
  __m256i x = _mm256_blend_epi32(a, b, 0xCC), y = _mm256_blend_epi32(b, a, 0xCC);
  return _mm256_add_epi32(x, _mm256_shuffle_epi32(y, _MM_SHUFFLE(1, 0, 3, 2)));
}
TERN_AVX2 inline __m256i reduce8(const __m256i* p) {
  __m256i lo = add_quads(add_pairs(p[0], p[1]), add_pairs(p[2], p[3]));  // per 128-bit half
  __m256i hi = add_quads(add_pairs(p[4], p[5]), add_pairs(p[6], p[7]));
  return _mm256_add_epi32(_mm256_blend_epi32(lo, hi, 0xF0), _mm256_permute2x128_si256(lo, hi, 0x21));
}

TERN_AVX2 inline __m256i madd_ones(__m256i pairs16) {
  return _mm256_madd_epi16(pairs16, _mm256_set1_epi16(1));
}

// The 32 4-bit codes of a Q4_0 / MXFP4 block as bytes, in element order:
// low nibbles are elements 0-15, high nibbles 16-31.
TERN_AVX2 inline __m256i nibbles32(const uint8_t* qs) {
  // Broadcast load + shift + blend: no shuffle-port uop (measured faster than
  // vinserti128 of the shifted half).
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  v = _mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xF0);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// ---- 32-element formats against Q8_0 activations --------------------------

// Q8_0: vpmaddubsw(|w|, a * sign(w)); |w| <= 128, |a| <= 127 (Q8_0
// activations never hold -128), so a pair is at most 32512: no saturation.
struct Q8_0Kernel {
  static constexpr int64_t kBytes = sizeof(BlockQ8_0);
  struct Codes {
    __m256i w, abs_w;
  };
  TERN_AVX2 static Codes unpack(const uint8_t* block) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    return {w, _mm256_abs_epi8(w)};
  }
  TERN_AVX2 static __m256i dot(const Codes& c, __m256i a) {
    return madd_ones(_mm256_maddubs_epi16(c.abs_w, _mm256_sign_epi8(a, c.w)));
  }
  TERN_AVX2 static __m256 row_scales(const TileRows& t, int64_t off) { return gather_f16(t, off); }
  // acc += float(isum) * (d_w * d_a)
  TERN_AVX2 static __m256 product(__m256i isum, int32_t, __m256 d_w, float d_a) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d_w, _mm256_set1_ps(d_a)));
  }
};

// Q4_0: codes 0..15 unsigned, pairs <= 2 * 15 * 127; isum = sum(c a) - 8 sum(a).
struct Q4_0Kernel {
  static constexpr int64_t kBytes = sizeof(BlockQ4_0);
  using Codes = __m256i;
  TERN_AVX2 static Codes unpack(const uint8_t* block) { return nibbles32(block + 2); }
  TERN_AVX2 static __m256i dot(Codes c, __m256i a) { return madd_ones(_mm256_maddubs_epi16(c, a)); }
  TERN_AVX2 static __m256 row_scales(const TileRows& t, int64_t off) { return gather_f16(t, off); }
  // acc += float(isum) * d_w * d_a, left to right
  TERN_AVX2 static __m256 product(__m256i raw, int32_t act_sum, __m256 d_w, float d_a) {
    __m256i isum = _mm256_sub_epi32(raw, _mm256_set1_epi32(8 * act_sum));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), d_w), _mm256_set1_ps(d_a));
  }
};

// MXFP4: the doubled E2M1 value + 12 (0..24) unsigned, pairs <= 2 * 24 * 127;
// isum = sum((v + 12) a) - 12 sum(a).
struct Mxfp4Kernel {
  static constexpr int64_t kBytes = sizeof(BlockMxfp4);
  using Codes = __m256i;
  TERN_AVX2 static Codes unpack(const uint8_t* block) {
    const __m256i table = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
                                           12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return _mm256_shuffle_epi8(table, nibbles32(block + 1));
  }
  TERN_AVX2 static __m256i dot(Codes c, __m256i a) { return madd_ones(_mm256_maddubs_epi16(c, a)); }
  // 2^(e - 128) per row, as quant's e8m0_to_float_half (e < 2: subnormal).
  TERN_AVX2 static __m256 row_scales(const TileRows& t, int64_t off) {
    __m128i b = _mm_cvtsi32_si128(t.row[0][off]);
    b = _mm_insert_epi8(b, t.row[1][off], 1);
    b = _mm_insert_epi8(b, t.row[2][off], 2);
    b = _mm_insert_epi8(b, t.row[3][off], 3);
    b = _mm_insert_epi8(b, t.row[4][off], 4);
    b = _mm_insert_epi8(b, t.row[5][off], 5);
    b = _mm_insert_epi8(b, t.row[6][off], 6);
    b = _mm_insert_epi8(b, t.row[7][off], 7);
    __m256i e32 = _mm256_cvtepu8_epi32(b);
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e32, _mm256_set1_epi32(1)), 23);
    __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e32);
    __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e32);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, is_sub));
  }
  // acc += (d_a * 2^(e-128)) * float(isum)
  TERN_AVX2 static __m256 product(__m256i raw, int32_t act_sum, __m256 scale_w, float d_a) {
    __m256i isum = _mm256_sub_epi32(raw, _mm256_set1_epi32(12 * act_sum));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d_a), scale_w), _mm256_cvtepi32_ps(isum));
  }
};

TERN_AVX2 inline void prefetch_next(const TileRows& t, int64_t off, int64_t bytes) {
  // The rows of a later tile are one contiguous range: while block bytes
  // [off, off + bytes) of each row of this tile are computed, the same
  // fraction of that range is prefetched in address order into L2 (as the
  // AVX-512 batch-1 kernel, quant_avx512.cpp, which measured why).
  const int64_t end = std::min<int64_t>(kTileRows * (off + bytes), t.n_next * t.stride);
  for (int64_t o = (kTileRows * off + 63) & ~int64_t{63}; o < end; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(t.next + o), _MM_HINT_T1);
}

TERN_AVX2 inline void store_rows(const TileRows& t, __m256 v, float* y) {
  if (t.n_rows == 8) {
    _mm256_storeu_ps(y, v);
  } else {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(y, tmp, static_cast<size_t>(t.n_rows) * 4);
  }
}

// 8 rows x (T tokens, or nt when T == 0) of a 32-element format. Per block:
// decode the 8 rows once, then each token's block meets all 8.
template <class K, int T>
TERN_AVX2 void tile_q8_0_acts(const TileRows& tr, int64_t n_blocks, const QuantActs& acts,
                              int64_t t0, int nt, float* y, int64_t ldy) {
  const int n = T > 0 ? T : nt;
  __m256 acc[T > 0 ? T : kMaxTileTokens];
  for (int t = 0; t < n; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t nbr = acts.blocks_per_row;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * K::kBytes;
    prefetch_next(tr, off, K::kBytes);
    typename K::Codes codes[8];
    for (int r = 0; r < 8; ++r) codes[r] = K::unpack(tr.row[r] + off);
    const __m256 d_w = K::row_scales(tr, off);
    for (int t = 0; t < n; ++t) {
      const int64_t tok = t0 + t;
      const uint8_t* ab = acts.blocks + tok * acts.row_bytes + b * int64_t{sizeof(BlockQ8_0)};
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 2));
      __m256i p[8];
      for (int r = 0; r < 8; ++r) p[r] = K::dot(codes[r], a);
      acc[t] = _mm256_add_ps(acc[t], K::product(reduce8(p), acts.sums[tok * nbr + b], d_w,
                                                acts.scales[tok * nbr + b]));
    }
  }
  for (int t = 0; t < n; ++t) store_rows(tr, acc[t], y + t * ldy);
}

// ---- 256-element K-quants against Q8_K activations --------------------------

// The per-sub-block int16 multipliers of a row block, broadcast to the lanes
// vpmaddwd pairs them with (kept in memory: 8 registers each).
struct alignas(32) SubScales {
  __m256i v[8];
};

// Q4_K: codes 0..15 (pairs <= 2 * 15 * 128), sub-block scale sc_s via
// vpmaddwd (int32 sum <= 8 * 32 * 15 * 128 * 63 < 2^31); mins through bsums.
struct Q4_KKernel {
  static constexpr int64_t kBytes = sizeof(BlockQ4K);
  static constexpr bool kHasMins = true;
  struct Row {
    __m256i codes[8];  // sub-block s, elements in order
    SubScales sc;
    __m256i mins;  // m_s for bsums 2s and 2s + 1
  };
  TERN_AVX2 static void unpack(const uint8_t* block, Row& row) {
    const auto* blk = reinterpret_cast<const BlockQ4K*>(block);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * c));
      row.codes[2 * c] = _mm256_and_si256(q, low4);
      row.codes[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    }
    // ggml's unpacking of the 12 scale bytes: bytes 0-7 = sc_0..7, 8-15 = m_0..7
    // (the same values as q4_k_scale_min).
    uint32_t u[4];
    std::memcpy(u, blk->scales, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const uint32_t m_low = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = m_low;
    u[0] &= k1;
    __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
    __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    for (int s = 0; s < 8; ++s)
      row.sc.v[s] = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<int16_t>(((2 * s + 1) << 8) | (2 * s))));
    __m128i m = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
    row.mins = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(m, m)), _mm_unpackhi_epi16(m, m), 1);
  }
  TERN_AVX2 static void dot(const Row& row, const BlockQ8K* a, __m256i& isum, __m256i& imin) {
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->qs + 32 * k));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(row.codes[k], qa), row.sc.v[k]));
    }
    isum = s;
    imin = _mm256_madd_epi16(row.mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->bsums)));
  }
  // acc += (d_w * d_a) * float(isum); acc -= (dmin_w * d_a) * float(imin)
  TERN_AVX2 static __m256 accumulate(__m256 acc, const TileRows& t, int64_t off, const __m256* ws,
                                     __m256i isum, __m256i imin, float d_a) {
    (void)t, (void)off;
    const __m256 da = _mm256_set1_ps(d_a);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(ws[0], da), _mm256_cvtepi32_ps(isum)));
    return _mm256_sub_ps(acc, _mm256_mul_ps(_mm256_mul_ps(ws[1], da), _mm256_cvtepi32_ps(imin)));
  }
  TERN_AVX2 static void row_scales(const TileRows& t, int64_t off, __m256* ws) {
    ws[0] = gather_f16(t, off + offsetof(BlockQ4K, d));
    ws[1] = gather_f16(t, off + offsetof(BlockQ4K, dmin));
  }
};

// Q6_K: codes 0..63 (pairs <= 2 * 63 * 128), int8 sub-block scales via
// vpmaddwd; isum = sum_s sc_s sum(c a) - 32 sum_s sc_s bsum_s (|.| < 2^28).
struct Q6_KKernel {
  static constexpr int64_t kBytes = sizeof(BlockQ6K);
  static constexpr bool kHasMins = false;
  struct Row {
    __m256i codes[8];  // elements 32k .. 32k + 31
    SubScales sc;      // k: lanes 0-7 scale 2k, lanes 8-15 scale 2k + 1
    __m256i scales;    // the 16 scales as int16, for the bsums
  };
  TERN_AVX2 static void unpack(const uint8_t* block, Row& row) {
    const auto* blk = reinterpret_cast<const BlockQ6K*>(block);
    const __m256i low4 = _mm256_set1_epi8(0x0F), high2 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 64 * h));
      __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 64 * h + 32));
      __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h));
      // quarter t: low 4 bits from l0/l1 (low nibbles t < 2), high 2 bits (qh >> 2t) & 3.
      row.codes[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high2));
      row.codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high2));
      row.codes[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(qh, high2));
      row.codes[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), high2));
    }
    row.scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
    const __m256i lo = _mm256_permute2x128_si256(row.scales, row.scales, 0x00);
    const __m256i hi = _mm256_permute2x128_si256(row.scales, row.scales, 0x11);
    for (int k = 0; k < 8; ++k) {
      const int i = 2 * (k % 4);  // int16 lane of scale 2k within its half
      const __m256i pick = _mm256_setr_epi8(
          2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i,
          2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i + 2, 2 * i + 3, 2 * i + 2, 2 * i + 3, 2 * i + 2,
          2 * i + 3, 2 * i + 2, 2 * i + 3, 2 * i + 2, 2 * i + 3, 2 * i + 2, 2 * i + 3, 2 * i + 2, 2 * i + 3,
          2 * i + 2, 2 * i + 3);
      row.sc.v[k] = _mm256_shuffle_epi8(k < 4 ? lo : hi, pick);
    }
  }
  TERN_AVX2 static void dot(const Row& row, const BlockQ8K* a, __m256i& isum, __m256i&) {
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->qs + 32 * k));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(row.codes[k], qa), row.sc.v[k]));
    }
    __m256i bias = _mm256_madd_epi16(row.scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->bsums)));
    isum = _mm256_sub_epi32(s, _mm256_slli_epi32(bias, 5));
  }
  // acc += (d_w * d_a) * float(isum)
  TERN_AVX2 static __m256 accumulate(__m256 acc, const TileRows&, int64_t, const __m256* ws,
                                     __m256i isum, __m256i, float d_a) {
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(ws[0], _mm256_set1_ps(d_a)), _mm256_cvtepi32_ps(isum)));
  }
  TERN_AVX2 static void row_scales(const TileRows& t, int64_t off, __m256* ws) {
    ws[0] = gather_f16(t, off + offsetof(BlockQ6K, d));
  }
};

// 8 rows x (T tokens, or nt when T == 0) of a K-quant. Per block: decode one
// row at a time and meet every token with it; then reduce the 8 rows' sums
// per token and scale them in.
template <class K, int T>
TERN_AVX2 void tile_q8_k_acts(const TileRows& tr, int64_t n_blocks, const QuantActs& acts,
                              int64_t t0, int nt, float* y, int64_t ldy) {
  const int n = T > 0 ? T : nt;
  constexpr int kN = T > 0 ? T : kMaxTileTokens;
  __m256 acc[kN];
  for (int t = 0; t < n; ++t) acc[t] = _mm256_setzero_ps();
  __m256i isum[kN][8], imin[kN][8];
  typename K::Row row;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * K::kBytes;
    for (int r = 0; r < 8; ++r) {
      // spread over the block
      prefetch_next(tr, off + r * K::kBytes / 8, (r + 1) * K::kBytes / 8 - r * K::kBytes / 8);
      K::unpack(tr.row[r] + off, row);
      for (int t = 0; t < n; ++t) {
        const auto* a = reinterpret_cast<const BlockQ8K*>(acts.blocks + (t0 + t) * acts.row_bytes) + b;
        K::dot(row, a, isum[t][r], imin[t][r]);
      }
    }
    __m256 ws[2];
    K::row_scales(tr, off, ws);
    for (int t = 0; t < n; ++t) {
      const auto* a = reinterpret_cast<const BlockQ8K*>(acts.blocks + (t0 + t) * acts.row_bytes) + b;
      const __m256i mins = K::kHasMins ? reduce8(imin[t]) : _mm256_setzero_si256();
      acc[t] = K::accumulate(acc[t], tr, off, ws, reduce8(isum[t]), mins, a->d);
    }
  }
  for (int t = 0; t < n; ++t) store_rows(tr, acc[t], y + t * ldy);
}

// Walks [row_begin, row_end) in tiles of 8 rows, tokens in blocks whose
// quantized activations stay in L2 while the rows stream past once per block.
template <class K, bool kSmall>
void gemm_format(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts,
                 int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t n_blocks = w.row_stride / K::kBytes;
  const int64_t token_bytes = acts.row_bytes + (acts.scales != nullptr ? acts.blocks_per_row * 8 : 0);
  const int64_t token_block =
      std::clamp<int64_t>(kTokenBlockBytes / std::max<int64_t>(1, token_bytes), 1, kMaxTileTokens);
  constexpr int64_t prefetch_rows = kTileRows * kPrefetchTiles;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
    const int nt = static_cast<int>(std::min(token_block, n_tokens - t0));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
      TileRows tr;
      tr.n_rows = static_cast<int>(std::min<int64_t>(8, row_end - r0));
      for (int i = 0; i < 8; ++i) tr.row[i] = w.data + (r0 + std::min(i, tr.n_rows - 1)) * w.row_stride;
      tr.stride = w.row_stride;
      tr.next = w.data + (r0 + prefetch_rows) * w.row_stride;
      tr.n_next = static_cast<int>(std::clamp<int64_t>(row_end - r0 - prefetch_rows, 0, 8));
      float* yt = y + t0 * ldy + r0;
      if constexpr (kSmall) {
        if (nt == 1) tile_q8_0_acts<K, 1>(tr, n_blocks, acts, t0, 1, yt, ldy);
        else tile_q8_0_acts<K, 0>(tr, n_blocks, acts, t0, nt, yt, ldy);
      } else {
        if (nt == 1) tile_q8_k_acts<K, 1>(tr, n_blocks, acts, t0, 1, yt, ldy);
        else tile_q8_k_acts<K, 0>(tr, n_blocks, acts, t0, nt, yt, ldy);
      }
    }
  }
}

void gemm_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts,
               int64_t n_tokens, float* y, int64_t ldy) {
  switch (w.format) {
    case TensorFormat::Q8_0: return gemm_format<Q8_0Kernel, true>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::Q4_0: return gemm_format<Q4_0Kernel, true>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::MXFP4: return gemm_format<Mxfp4Kernel, true>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::Q4_K: return gemm_format<Q4_KKernel, false>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::Q6_K: return gemm_format<Q6_KKernel, false>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    default: fail("quantized kernels: unsupported weight format '{}'", format_name(w.format));
  }
}

}  // namespace

const QuantKernels* avx2_quant_kernels() {
  static const QuantKernels kernels{quantize_acts_avx2, gemm_rows};
  return &kernels;
}

}  // namespace tern::detail

#else

namespace tern::detail {
const QuantKernels* avx2_quant_kernels() { return nullptr; }
}  // namespace tern::detail

#endif
