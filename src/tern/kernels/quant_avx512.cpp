// AVX-512 + VNNI kernels for block-quantized weights (Q8_0, Q4_0, MXFP4,
// Q4_K) against 8-bit activations: 16-row zmm tiles for batches (prefill,
// tokens sharing an expert), 8-row ymm tiles (AVX-512VL) for a lone token
// (decode; see "Batch 1" below); Q6_K runs the AVX2 kernels (see gemm_rows).
// Bit-identical to the portable path (quant's vec_dot_*_q8), see
// quant_kernels.h.
//
// Layout: a tile is 16 weight rows, ONE ROW PER 32-BIT LANE of a zmm
// register. Each weight block of the 16 rows is transposed once (lane r,
// register k = bytes 4k..4k+3 of row r's codes), so one vpdpbusd with the
// token's activation dword k broadcast from memory adds 4 products of every
// row into its own lane: a (row, token, block) integer sum ends in its lane
// with no horizontal reduction at all (the AVX2 kernels spend a reduce8 per
// block and token). The transposed codes stay in registers while every token
// of the batch meets them, so decoding is paid once per block, not per token.
//
// Exactness: vpdpbusd multiplies unsigned weight codes by signed activation
// bytes and adds 4 products to an int32 lane without intermediate
// saturation (unlike vpmaddubsw); the sums are < 2^28. Code offsets (Q8_0:
// w + 128, Q4_0: 8, MXFP4: 12) are taken out through the activation block's
// code sum, as in the AVX2 kernels. The float operations of each block are
// exactly the scalar reference's, lane by lane (no fusing).
#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/quant_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 intrinsics (the undefined pass-through
// vector of unmasked unpack/insert/pmov, GCC bug 105593): not our code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tern/core/error.h"
#include "tern/quant/blocks.h"

namespace tern::detail {

#define TERN_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace {

// Tokens whose accumulators a batch tile keeps; more tokens are taken in
// further token blocks.
constexpr int kMaxTileTokens = 32;

constexpr int kTileRows = 16;
// Software prefetch runs this many tiles ahead of the tile being computed.
constexpr int64_t kPrefetchTiles16 = 2;

// The 16 rows of a tile. Rows past the end of a ragged last tile repeat its
// last row (computed, never stored), so every tile runs the same code.
struct Tile16 {
  const uint8_t* row[kTileRows];
  const uint8_t* next;  // first row of the tile to prefetch (kPrefetchTiles16 ahead, this thread's)
  int64_t stride;
  int n_next;  // rows of that tile to prefetch
  int n_rows;  // valid rows, 1..16
};

TERN_AVX512 inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

TERN_AVX512 inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// out[k] lane r = the dword at row[r] + off + 4k, k < 4: 16 loads of 16
// bytes, then a 4x4 dword transpose inside each 128-bit lane (register g
// holds rows g, 4 + g, 8 + g, 12 + g in its four 128-bit lanes).
TERN_AVX512 inline void load16x4(const Tile16& t, int64_t off, __m512i out[4]) {
  __m512i l[4];
  for (int g = 0; g < 4; ++g) {
    __m512i v = _mm512_castsi128_si512(load128(t.row[g] + off));
    v = _mm512_inserti32x4(v, load128(t.row[4 + g] + off), 1);
    v = _mm512_inserti32x4(v, load128(t.row[8 + g] + off), 2);
    l[g] = _mm512_inserti32x4(v, load128(t.row[12 + g] + off), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(l[0], l[1]), t1 = _mm512_unpackhi_epi32(l[0], l[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(l[2], l[3]), t3 = _mm512_unpackhi_epi32(l[2], l[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The f16 at byte `off` of each row, as 16 floats (lane r = row r). Exact.
// One 4-byte gather; the dword never reaches past the block it starts in.
// The f16 at byte `off` of each row, as 16 floats (lane r = row r). Exact.
// The dword read never reaches past the block it starts in. (Scalar loads:
// vpgatherdd measured 7-17% slower at batch 1.)
TERN_AVX512 inline __m512 gather_f16(const Tile16& t, int64_t off) {
  const __m512i v = _mm512_setr_epi32(
      load_i32(t.row[0] + off), load_i32(t.row[1] + off), load_i32(t.row[2] + off), load_i32(t.row[3] + off),
      load_i32(t.row[4] + off), load_i32(t.row[5] + off), load_i32(t.row[6] + off), load_i32(t.row[7] + off),
      load_i32(t.row[8] + off), load_i32(t.row[9] + off), load_i32(t.row[10] + off), load_i32(t.row[11] + off),
      load_i32(t.row[12] + off), load_i32(t.row[13] + off), load_i32(t.row[14] + off), load_i32(t.row[15] + off));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

TERN_AVX512 inline __m512i bcast_i32(const uint8_t* p) { return _mm512_set1_epi32(load_i32(p)); }

TERN_AVX512 inline __m512i low_nibbles(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
TERN_AVX512 inline __m512i high_nibbles(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 4), _mm512_set1_epi8(0x0F));
}

// ---- 32-element formats against Q8_0 activations --------------------------
// unpack: codes[k] lane r = unsigned codes of elements 4k..4k+3 of row r's
// block, k < 8; kOffset: what the codes exceed the signed values by.

// Q8_0: w + 128 (0..255, bit 7 flipped); acc += float(isum) * (d_w * d_a).
struct Q8_0Kernel {
  static constexpr int64_t kBytes = sizeof(BlockQ8_0);
  static constexpr int32_t kOffset = 128;
  TERN_AVX512 static void unpack(const Tile16& t, int64_t off, __m512i codes[8]) {
    load16x4(t, off + 2, codes);
    load16x4(t, off + 18, codes + 4);
    for (int k = 0; k < 8; ++k) codes[k] = _mm512_xor_si512(codes[k], _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  TERN_AVX512 static __m512 row_scales(const Tile16& t, int64_t off) { return gather_f16(t, off); }
  TERN_AVX512 static __m512 product(__m512i isum, __m512 d_w, float d_a) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d_w, _mm512_set1_ps(d_a)));
  }
};

// Q4_0: low nibbles are elements 0-15, high 16-31; acc += float(isum) * d_w * d_a.
struct Q4_0Kernel {
  static constexpr int64_t kBytes = sizeof(BlockQ4_0);
  static constexpr int32_t kOffset = 8;
  TERN_AVX512 static void unpack(const Tile16& t, int64_t off, __m512i codes[8]) {
    __m512i q[4];
    load16x4(t, off + 2, q);
    for (int k = 0; k < 4; ++k) {
      codes[k] = low_nibbles(q[k]);
      codes[k + 4] = high_nibbles(q[k]);
    }
  }
  TERN_AVX512 static __m512 row_scales(const Tile16& t, int64_t off) { return gather_f16(t, off); }
  TERN_AVX512 static __m512 product(__m512i isum, __m512 d_w, float d_a) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum), d_w), _mm512_set1_ps(d_a));
  }
};

// MXFP4: the doubled E2M1 value + 12 (0..24); acc += (d_a * 2^(e-128)) * float(isum).
struct Mxfp4Kernel {
  static constexpr int64_t kBytes = sizeof(BlockMxfp4);
  static constexpr int32_t kOffset = 12;
  TERN_AVX512 static void unpack(const Tile16& t, int64_t off, __m512i codes[8]) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512i q[4];
    load16x4(t, off + 1, q);
    for (int k = 0; k < 4; ++k) {
      codes[k] = _mm512_shuffle_epi8(table, low_nibbles(q[k]));
      codes[k + 4] = _mm512_shuffle_epi8(table, high_nibbles(q[k]));
    }
  }
  // 2^(e - 128) per row, as quant's e8m0_to_float_half (e < 2: subnormal).
  TERN_AVX512 static __m512 row_scales(const Tile16& t, int64_t off) {
    __m128i b = _mm_setr_epi8(static_cast<char>(t.row[0][off]), static_cast<char>(t.row[1][off]),
                              static_cast<char>(t.row[2][off]), static_cast<char>(t.row[3][off]),
                              static_cast<char>(t.row[4][off]), static_cast<char>(t.row[5][off]),
                              static_cast<char>(t.row[6][off]), static_cast<char>(t.row[7][off]),
                              static_cast<char>(t.row[8][off]), static_cast<char>(t.row[9][off]),
                              static_cast<char>(t.row[10][off]), static_cast<char>(t.row[11][off]),
                              static_cast<char>(t.row[12][off]), static_cast<char>(t.row[13][off]),
                              static_cast<char>(t.row[14][off]), static_cast<char>(t.row[15][off]));
    const __m512i e = _mm512_cvtepu8_epi32(b);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 is_sub = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_sub, normal, sub));
  }
  TERN_AVX512 static __m512 product(__m512i isum, __m512 scale_w, float d_a) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(d_a), scale_w), _mm512_cvtepi32_ps(isum));
  }
};

// The rows of a tile are one contiguous range, so the tile kPrefetchTiles16
// ahead is fetched as one address-ordered stream into L2: while bytes
// [off, off + bytes) of each row are computed, the same fraction of that
// tile's range (as the batch-1 kernels below do).
TERN_AVX512 inline void prefetch_next(const Tile16& t, int64_t off, int64_t bytes) {
  const int64_t end = std::min<int64_t>(kTileRows * (off + bytes), t.n_next * t.stride);
  for (int64_t o = (kTileRows * off + 63) & ~int64_t{63}; o < end; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(t.next + o), _MM_HINT_T1);
}

TERN_AVX512 inline void store_rows(const Tile16& t, __m512 v, float* y) {
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << t.n_rows) - 1), v);
}

// 16 rows x (T tokens, or nt when T == 0) of a 32-element format. Per block:
// transpose the 16 rows' codes once, then each token's block meets all 16
// with 8 vpdpbusd. The integer sum starts at -offset * sum(a).
template <class K, int T>
TERN_AVX512 void tile_q8_0_acts(const Tile16& tr, int64_t n_blocks, const QuantActs& acts, int64_t t0, int nt,
                                float* y, int64_t ldy) {
  const int n = T > 0 ? T : nt;
  __m512 acc[T > 0 ? T : kMaxTileTokens];
  for (int t = 0; t < n; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t nbr = acts.blocks_per_row;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * K::kBytes;
    prefetch_next(tr, off, K::kBytes);
    __m512i codes[8];
    K::unpack(tr, off, codes);
    const __m512 d_w = K::row_scales(tr, off);
    for (int t = 0; t < n; ++t) {
      const int64_t tok = t0 + t;
      const uint8_t* qa = acts.blocks + tok * acts.row_bytes + b * int64_t{sizeof(BlockQ8_0)} + 2;
      // Two chains of 4 so the vpdpbusd latency overlaps.
      __m512i s0 = _mm512_set1_epi32(-K::kOffset * acts.sums[tok * nbr + b]), s1 = _mm512_setzero_si512();
      for (int k = 0; k < 8; k += 2) {
        s0 = _mm512_dpbusd_epi32(s0, codes[k], bcast_i32(qa + 4 * k));
        s1 = _mm512_dpbusd_epi32(s1, codes[k + 1], bcast_i32(qa + 4 * k + 4));
      }
      acc[t] = _mm512_add_ps(acc[t], K::product(_mm512_add_epi32(s0, s1), d_w, acts.scales[tok * nbr + b]));
    }
  }
  for (int t = 0; t < n; ++t) store_rows(tr, acc[t], y + t * ldy);
}

// ---- Q4_K against Q8_K activations ------------------------------------------

// The per-row constants of a Q4_K super-block, one row per lane: d, dmin,
// the 8 sub-block scales sc_s and the 8 mins m_s as int16 pairs (m_s, m_s)
// for vpdpwssd against the bsums pair (2s, 2s + 1).
struct Q4KHead {
  __m512 d, dmin;
  __m512i sc[8], m_pair[8];
};

TERN_AVX512 inline void q4_k_head(const Tile16& t, int64_t off, Q4KHead& h) {
  __m512i w[4];  // d | dmin << 16, then the 12 scale bytes as u0, u1, u2
  load16x4(t, off, w);
  h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w[0]));
  h.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w[0], 16)));
  // ggml's unpacking of the 12 scale bytes (as q4_k_scale_min), per lane.
  const __m512i k1 = _mm512_set1_epi32(0x3f3f3f3f), k2 = _mm512_set1_epi32(0x0f0f0f0f),
                k3 = _mm512_set1_epi32(0x03030303);
  const __m512i sc_lo = _mm512_and_si512(w[1], k1);
  const __m512i m_lo = _mm512_and_si512(w[2], k1);
  const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(w[3], k2),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w[1], 6), k3), 4));
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w[3], 4), k2),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w[2], 6), k3), 4));
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (int j = 0; j < 4; ++j) {
    h.sc[j] = _mm512_and_si512(_mm512_srli_epi32(sc_lo, 8 * j), byte);
    h.sc[4 + j] = _mm512_and_si512(_mm512_srli_epi32(sc_hi, 8 * j), byte);
    const __m512i ml = _mm512_and_si512(_mm512_srli_epi32(m_lo, 8 * j), byte);
    const __m512i mh = _mm512_and_si512(_mm512_srli_epi32(m_hi, 8 * j), byte);
    h.m_pair[j] = _mm512_or_si512(ml, _mm512_slli_epi32(ml, 16));
    h.m_pair[4 + j] = _mm512_or_si512(mh, _mm512_slli_epi32(mh, 16));
  }
}

// 16 rows x (T tokens, or nt when T == 0) of Q4_K. Per super-block: decode
// the rows' scales, then per 64-element chunk transpose the codes of
// sub-blocks 2c and 2c + 1 (16 registers) and meet every token with them:
// isum += sc_s * dot_s (exact int32: < 8 * 32 * 15 * 128 * 63 < 2^31). The
// mins meet the bsums through vpdpwssd: imin = sum_s m_s (bsum_2s + bsum_2s+1).
template <int T>
TERN_AVX512 void tile_q4_k(const Tile16& tr, int64_t n_blocks, const QuantActs& acts, int64_t t0, int nt, float* y,
                           int64_t ldy) {
  const int n = T > 0 ? T : nt;
  constexpr int kN = T > 0 ? T : kMaxTileTokens;
  __m512 acc[kN];
  __m512i isum[kN];
  for (int t = 0; t < n; ++t) acc[t] = _mm512_setzero_ps();
  constexpr int64_t kBytes = sizeof(BlockQ4K);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * kBytes;
    Q4KHead h;
    q4_k_head(tr, off, h);
    for (int t = 0; t < n; ++t) isum[t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      prefetch_next(tr, off + c * (kBytes / 4), kBytes / 4);  // spread over the block
      __m512i q[8], lo[8], hi[8];
      load16x4(tr, off + offsetof(BlockQ4K, qs) + 32 * c, q);
      load16x4(tr, off + offsetof(BlockQ4K, qs) + 32 * c + 16, q + 4);
      for (int k = 0; k < 8; ++k) {
        lo[k] = low_nibbles(q[k]);
        hi[k] = high_nibbles(q[k]);
      }
      for (int t = 0; t < n; ++t) {
        const auto* a = reinterpret_cast<const BlockQ8K*>(acts.blocks + (t0 + t) * acts.row_bytes) + b;
        const uint8_t* qa = reinterpret_cast<const uint8_t*>(a->qs) + 64 * c;
        __m512i s_lo = _mm512_setzero_si512(), s_hi = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) {
          s_lo = _mm512_dpbusd_epi32(s_lo, lo[k], bcast_i32(qa + 4 * k));
          s_hi = _mm512_dpbusd_epi32(s_hi, hi[k], bcast_i32(qa + 32 + 4 * k));
        }
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(s_lo, h.sc[2 * c]),
                                                             _mm512_mullo_epi32(s_hi, h.sc[2 * c + 1])));
      }
    }
    for (int t = 0; t < n; ++t) {
      const auto* a = reinterpret_cast<const BlockQ8K*>(acts.blocks + (t0 + t) * acts.row_bytes) + b;
      const auto* bsums = reinterpret_cast<const uint8_t*>(a->bsums);
      __m512i imin = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) imin = _mm512_dpwssd_epi32(imin, h.m_pair[s], bcast_i32(bsums + 4 * s));
      // acc += (d_w * d_a) * float(isum); acc -= (dmin_w * d_a) * float(imin)
      const __m512 da = _mm512_set1_ps(a->d);
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(h.d, da), _mm512_cvtepi32_ps(isum[t])));
      acc[t] = _mm512_sub_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(h.dmin, da), _mm512_cvtepi32_ps(imin)));
    }
  }
  for (int t = 0; t < n; ++t) store_rows(tr, acc[t], y + t * ldy);
}

// Walks [row_begin, row_end) in tiles of 16 rows, tokens in blocks whose
// quantized activations stay in L2 while the rows stream past once per block.
template <class Tile>
void gemm_format(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts, int64_t n_tokens,
                 float* y, int64_t ldy, int64_t block_bytes, Tile tile) {
  const int64_t n_blocks = w.row_stride / block_bytes;
  const int64_t token_bytes = acts.row_bytes + (acts.scales != nullptr ? acts.blocks_per_row * 8 : 0);
  const int64_t token_block =
      std::clamp<int64_t>(kTokenBlockBytes / std::max<int64_t>(1, token_bytes), 1, kMaxTileTokens);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
    const int nt = static_cast<int>(std::min(token_block, n_tokens - t0));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
      Tile16 tr;
      tr.n_rows = static_cast<int>(std::min<int64_t>(kTileRows, row_end - r0));
      for (int i = 0; i < kTileRows; ++i) tr.row[i] = w.data + (r0 + std::min(i, tr.n_rows - 1)) * w.row_stride;
      tr.stride = w.row_stride;
      constexpr int64_t kAhead = kTileRows * kPrefetchTiles16;
      tr.next = w.data + (r0 + kAhead) * w.row_stride;
      tr.n_next = static_cast<int>(std::clamp<int64_t>(row_end - r0 - kAhead, 0, kTileRows));
      tile(tr, n_blocks, acts, t0, nt, y + t0 * ldy + r0, ldy);
    }
  }
}

template <class K>
void gemm_small(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts, int64_t n_tokens,
                float* y, int64_t ldy) {
  gemm_format(w, row_begin, row_end, acts, n_tokens, y, ldy, K::kBytes,
              [](const Tile16& tr, int64_t nb, const QuantActs& a, int64_t t0, int nt, float* yt, int64_t ld) {
                if (nt == 1) tile_q8_0_acts<K, 1>(tr, nb, a, t0, 1, yt, ld);
                else tile_q8_0_acts<K, 0>(tr, nb, a, t0, nt, yt, ld);
              });
}

// ---- Batch 1: 8 rows per tile on ymm registers ------------------------------
// A lone token (decode) streams its weights from DRAM once. The 16-row zmm
// tiles above lose there (16 row streams per thread; 0.70-1.13x AVX2), so a
// lone token takes this variant: the same transposed layout (one row per
// 32-bit lane, vpdpbusd with a broadcast activation dword, no horizontal
// reduction per block) on 256-bit registers, 8 rows per tile like the AVX2
// kernels, with their software prefetch of the next tile's rows.

constexpr int kTileRows8 = 8;
// Software prefetch runs this many tiles ahead of the tile being computed
// (interleaved A/B, 2 threads, from DRAM: 1 tile lost up to 25% on rows of
// 768 columns; 4 tiles, or >= 16 KiB ahead, lost 5-20% on 768x2048).
constexpr int64_t kPrefetchTiles8 = 2;

struct Tile8 {
  const uint8_t* row[kTileRows8];
  const uint8_t* next;  // first row of the next tile of this thread, to prefetch
  int64_t stride;
  int n_next;  // rows of the next tile to prefetch
  int n_rows;  // valid rows, 1..8
};

// out[k] lane r = the dword at row[r] + off + 4k, k < 4: 8 loads of 16
// bytes, then a 4x4 dword transpose inside each 128-bit lane (register g
// holds rows g and 4 + g).
TERN_AVX512 inline void load8x4(const Tile8& t, int64_t off, __m256i out[4]) {
  __m256i l[4];
  for (int g = 0; g < 4; ++g)
    l[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(t.row[g] + off)), load128(t.row[4 + g] + off), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(l[0], l[1]), t1 = _mm256_unpackhi_epi32(l[0], l[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(l[2], l[3]), t3 = _mm256_unpackhi_epi32(l[2], l[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

TERN_AVX512 inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The f16 at byte `off` of each row, as 8 floats (lane r = row r). Exact.
TERN_AVX512 inline __m256 gather_f16_8(const Tile8& t, int64_t off) {
  auto h = [&](int r) { return static_cast<short>(load_u16(t.row[r] + off)); };
  // _mm_setr, not an insert loop: the lane index of vpinsrw must be a
  // constant even when the loop is not unrolled (-O0, sanitizer builds).
  return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
}

TERN_AVX512 inline __m256i bcast8_i32(const uint8_t* p) { return _mm256_set1_epi32(load_i32(p)); }
TERN_AVX512 inline __m256i low_nibbles8(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
TERN_AVX512 inline __m256i high_nibbles8(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi32(v, 4), _mm256_set1_epi8(0x0F));
}

// The rows of a later tile are one contiguous range: while block bytes
// [off, off + bytes) of each row of this tile are computed, the same fraction
// of that range is prefetched IN ADDRESS ORDER (one sequential stream, a few
// lines per call) INTO L2 (prefetcht1). Measured from DRAM, 2 threads,
// against the AVX2 kernels' former prefetch (8 row streams, the whole block
// of each row at once, into L1): with that scheme this kernel was 0.93-1.02x
// AVX2 although 1.3-1.6x faster in cache; per-row -> address order made Q4_K
// 1.5-2.3x (its 144-byte blocks had issued 8x3 prefetches in a burst) but
// Q8_0 0.70-0.86x (a whole tile ahead into L1 overflows its 32 KiB when rows
// are long); L1 -> L2 then won everywhere.
TERN_AVX512 inline void prefetch_next8(const Tile8& t, int64_t off, int64_t bytes) {
  const int64_t end = std::min<int64_t>(kTileRows8 * (off + bytes), t.n_next * t.stride);
  for (int64_t o = (kTileRows8 * off + 63) & ~int64_t{63}; o < end; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(t.next + o), _MM_HINT_T1);
}

TERN_AVX512 inline void store_rows8(const Tile8& t, __m256 v, float* y) {
  _mm256_mask_storeu_ps(y, static_cast<__mmask8>((1u << t.n_rows) - 1), v);
}

// unpack: codes[k] lane r = unsigned codes of elements 4k..4k+3 of row r's
// block, k < 8; kOffset as above; product: the scalar reference's float
// operations of a block.
struct Q8_0Kernel8 {
  static constexpr int64_t kBytes = sizeof(BlockQ8_0);
  static constexpr int32_t kOffset = 128;
  TERN_AVX512 static void unpack(const Tile8& t, int64_t off, __m256i codes[8]) {
    load8x4(t, off + 2, codes);
    load8x4(t, off + 18, codes + 4);
    for (int k = 0; k < 8; ++k) codes[k] = _mm256_xor_si256(codes[k], _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  TERN_AVX512 static __m256 row_scales(const Tile8& t, int64_t off) { return gather_f16_8(t, off); }
  // acc += float(isum) * (d_w * d_a)
  TERN_AVX512 static __m256 product(__m256i isum, __m256 d_w, float d_a) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d_w, _mm256_set1_ps(d_a)));
  }
};

struct Q4_0Kernel8 {
  static constexpr int64_t kBytes = sizeof(BlockQ4_0);
  static constexpr int32_t kOffset = 8;
  TERN_AVX512 static void unpack(const Tile8& t, int64_t off, __m256i codes[8]) {
    __m256i q[4];
    load8x4(t, off + 2, q);
    for (int k = 0; k < 4; ++k) {
      codes[k] = low_nibbles8(q[k]);
      codes[k + 4] = high_nibbles8(q[k]);
    }
  }
  TERN_AVX512 static __m256 row_scales(const Tile8& t, int64_t off) { return gather_f16_8(t, off); }
  // acc += float(isum) * d_w * d_a, left to right
  TERN_AVX512 static __m256 product(__m256i isum, __m256 d_w, float d_a) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), d_w), _mm256_set1_ps(d_a));
  }
};

struct Mxfp4Kernel8 {
  static constexpr int64_t kBytes = sizeof(BlockMxfp4);
  static constexpr int32_t kOffset = 12;
  TERN_AVX512 static void unpack(const Tile8& t, int64_t off, __m256i codes[8]) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m256i q[4];
    load8x4(t, off + 1, q);
    for (int k = 0; k < 4; ++k) {
      codes[k] = _mm256_shuffle_epi8(table, low_nibbles8(q[k]));
      codes[k + 4] = _mm256_shuffle_epi8(table, high_nibbles8(q[k]));
    }
  }
  // 2^(e - 128) per row, as quant's e8m0_to_float_half (e < 2: subnormal).
  TERN_AVX512 static __m256 row_scales(const Tile8& t, int64_t off) {
    auto e8 = [&](int r) { return static_cast<char>(t.row[r][off]); };
    const __m128i b = _mm_setr_epi8(e8(0), e8(1), e8(2), e8(3), e8(4), e8(5), e8(6), e8(7), 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i e = _mm256_cvtepu8_epi32(b);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __mmask8 is_sub = _mm256_cmplt_epi32_mask(e, _mm256_set1_epi32(2));
    return _mm256_castsi256_ps(_mm256_mask_blend_epi32(is_sub, normal, sub));
  }
  // acc += (d_a * 2^(e-128)) * float(isum)
  TERN_AVX512 static __m256 product(__m256i isum, __m256 scale_w, float d_a) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d_a), scale_w), _mm256_cvtepi32_ps(isum));
  }
};

// 8 rows x 1 token of a 32-element format: per block, transpose the 8 rows'
// codes, 8 vpdpbusd (two chains), the integer sum starting at -offset * sum(a).
template <class K>
TERN_AVX512 void tile8_q8_0_acts(const Tile8& tr, int64_t n_blocks, const QuantActs& acts, int64_t tok, float* y) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t nbr = acts.blocks_per_row;
  const uint8_t* qa_row = acts.blocks + tok * acts.row_bytes + 2;
  const int32_t* sums = acts.sums + tok * nbr;
  const float* scales = acts.scales + tok * nbr;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * K::kBytes;
    prefetch_next8(tr, off, K::kBytes);
    __m256i codes[8];
    K::unpack(tr, off, codes);
    const __m256 d_w = K::row_scales(tr, off);
    const uint8_t* qa = qa_row + b * int64_t{sizeof(BlockQ8_0)};
    __m256i s0 = _mm256_set1_epi32(-K::kOffset * sums[b]), s1 = _mm256_setzero_si256();
    for (int k = 0; k < 8; k += 2) {
      s0 = _mm256_dpbusd_epi32(s0, codes[k], bcast8_i32(qa + 4 * k));
      s1 = _mm256_dpbusd_epi32(s1, codes[k + 1], bcast8_i32(qa + 4 * k + 4));
    }
    acc = _mm256_add_ps(acc, K::product(_mm256_add_epi32(s0, s1), d_w, scales[b]));
  }
  store_rows8(tr, acc, y);
}

// 8 rows x 1 token of Q4_K, as tile_q4_k on ymm.
TERN_AVX512 void tile8_q4_k(const Tile8& tr, int64_t n_blocks, const QuantActs& acts, int64_t tok, float* y) {
  __m256 acc = _mm256_setzero_ps();
  constexpr int64_t kBytes = sizeof(BlockQ4K);
  const auto* a_row = reinterpret_cast<const BlockQ8K*>(acts.blocks + tok * acts.row_bytes);
  const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f), k2 = _mm256_set1_epi32(0x0f0f0f0f),
                k3 = _mm256_set1_epi32(0x03030303), byte = _mm256_set1_epi32(0xFF);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * kBytes;
    __m256i w[4];  // d | dmin << 16, then the 12 scale bytes as u0, u1, u2
    load8x4(tr, off, w);
    const __m256 d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(w[0]));
    const __m256 dmin = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(w[0], 16)));
    // ggml's unpacking of the 12 scale bytes (as q4_k_scale_min), per lane.
    const __m256i sc_lo = _mm256_and_si256(w[1], k1);
    const __m256i m_lo = _mm256_and_si256(w[2], k1);
    const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(w[3], k2),
                                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w[1], 6), k3), 4));
    const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w[3], 4), k2),
                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w[2], 6), k3), 4));
    const BlockQ8K* a = a_row + b;
    const auto* bsums = reinterpret_cast<const uint8_t*>(a->bsums);
    __m256i isum = _mm256_setzero_si256(), imin = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      prefetch_next8(tr, off + c * (kBytes / 4), kBytes / 4);  // spread over the block
      __m256i q[8];
      load8x4(tr, off + offsetof(BlockQ4K, qs) + 32 * c, q);
      load8x4(tr, off + offsetof(BlockQ4K, qs) + 32 * c + 16, q + 4);
      const uint8_t* qa = reinterpret_cast<const uint8_t*>(a->qs) + 64 * c;
      __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        s_lo = _mm256_dpbusd_epi32(s_lo, low_nibbles8(q[k]), bcast8_i32(qa + 4 * k));
        s_hi = _mm256_dpbusd_epi32(s_hi, high_nibbles8(q[k]), bcast8_i32(qa + 32 + 4 * k));
      }
      // sub-blocks 2c, 2c + 1: scale bytes j = c % 4 of sc_lo (c < 2) / sc_hi.
      const __m256i sc_src = c < 2 ? sc_lo : sc_hi, m_src = c < 2 ? m_lo : m_hi;
      const int j0 = (2 * c) % 4, j1 = j0 + 1;
      const __m256i sc0 = _mm256_and_si256(_mm256_srli_epi32(sc_src, 8 * j0), byte);
      const __m256i sc1 = _mm256_and_si256(_mm256_srli_epi32(sc_src, 8 * j1), byte);
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_mullo_epi32(s_lo, sc0), _mm256_mullo_epi32(s_hi, sc1)));
      const __m256i ml0 = _mm256_and_si256(_mm256_srli_epi32(m_src, 8 * j0), byte);
      const __m256i ml1 = _mm256_and_si256(_mm256_srli_epi32(m_src, 8 * j1), byte);
      imin = _mm256_dpwssd_epi32(imin, _mm256_or_si256(ml0, _mm256_slli_epi32(ml0, 16)), bcast8_i32(bsums + 8 * c));
      imin = _mm256_dpwssd_epi32(imin, _mm256_or_si256(ml1, _mm256_slli_epi32(ml1, 16)), bcast8_i32(bsums + 8 * c + 4));
    }
    // acc += (d_w * d_a) * float(isum); acc -= (dmin_w * d_a) * float(imin)
    const __m256 da = _mm256_set1_ps(a->d);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum)));
    acc = _mm256_sub_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(imin)));
  }
  store_rows8(tr, acc, y);
}

// Walks [row_begin, row_end) in tiles of 8 rows for each token (n_tokens is 1
// in practice: every token re-reads the rows).
template <class Tile>
void gemv8_format(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts, int64_t n_tokens,
                  float* y, int64_t ldy, int64_t block_bytes, Tile tile) {
  const int64_t n_blocks = w.row_stride / block_bytes;
  constexpr int64_t kPrefetchRows8 = kTileRows8 * kPrefetchTiles8;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows8) {
      Tile8 tr;
      tr.n_rows = static_cast<int>(std::min<int64_t>(kTileRows8, row_end - r0));
      for (int i = 0; i < kTileRows8; ++i) tr.row[i] = w.data + (r0 + std::min(i, tr.n_rows - 1)) * w.row_stride;
      tr.stride = w.row_stride;
      tr.next = w.data + (r0 + kPrefetchRows8) * w.row_stride;
      tr.n_next = static_cast<int>(std::clamp<int64_t>(row_end - r0 - kPrefetchRows8, 0, kTileRows8));
      tile(tr, n_blocks, acts, t, y + t * ldy + r0);
    }
  }
}

// The batch-1 kernels: false for Q6_K (not a target format), which runs AVX2.
bool gemv8_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts, int64_t n_tokens,
                float* y, int64_t ldy) {
  switch (w.format) {
    case TensorFormat::Q8_0:
      gemv8_format(w, row_begin, row_end, acts, n_tokens, y, ldy, Q8_0Kernel8::kBytes, tile8_q8_0_acts<Q8_0Kernel8>);
      return true;
    case TensorFormat::Q4_0:
      gemv8_format(w, row_begin, row_end, acts, n_tokens, y, ldy, Q4_0Kernel8::kBytes, tile8_q8_0_acts<Q4_0Kernel8>);
      return true;
    case TensorFormat::MXFP4:
      gemv8_format(w, row_begin, row_end, acts, n_tokens, y, ldy, Mxfp4Kernel8::kBytes, tile8_q8_0_acts<Mxfp4Kernel8>);
      return true;
    case TensorFormat::Q4_K:
      gemv8_format(w, row_begin, row_end, acts, n_tokens, y, ldy, sizeof(BlockQ4K), tile8_q4_k);
      return true;
    default: return false;
  }
}

void gemm_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const QuantActs& acts, int64_t n_tokens,
               float* y, int64_t ldy) {
  // Batch 1 (decode) streams weights from DRAM, where the 16-row tiles did
  // not pay (0.70-1.13x the AVX2 kernel, 1.4-1.9x in cache): a lone token
  // takes the 8-row kernels above. All give the same bits. Q6_K is not a
  // target format here.
  if (n_tokens == 1 && gemv8_rows(w, row_begin, row_end, acts, n_tokens, y, ldy)) return;
  if (n_tokens == 1 || w.format == TensorFormat::Q6_K)
    return avx2_quant_kernels()->gemm_rows(w, row_begin, row_end, acts, n_tokens, y, ldy);
  switch (w.format) {
    case TensorFormat::Q8_0: return gemm_small<Q8_0Kernel>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::Q4_0: return gemm_small<Q4_0Kernel>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::MXFP4: return gemm_small<Mxfp4Kernel>(w, row_begin, row_end, acts, n_tokens, y, ldy);
    case TensorFormat::Q4_K:
      return gemm_format(w, row_begin, row_end, acts, n_tokens, y, ldy, sizeof(BlockQ4K),
                         [](const Tile16& tr, int64_t nb, const QuantActs& a, int64_t t0, int nt, float* yt,
                            int64_t ld) {
                           if (nt == 1) tile_q4_k<1>(tr, nb, a, t0, 1, yt, ld);
                           else tile_q4_k<0>(tr, nb, a, t0, nt, yt, ld);
                         });
    default: fail("quantized kernels: unsupported weight format '{}'", format_name(w.format));
  }
}

}  // namespace

const QuantKernels* avx512_quant_kernels() {
  static const QuantKernels kernels{quantize_acts_avx2, gemm_rows};
  return &kernels;
}

}  // namespace tern::detail

#else

namespace tern::detail {
const QuantKernels* avx512_quant_kernels() { return nullptr; }
}  // namespace tern::detail

#endif
