// AVX2 + FMA + F16C dense kernels. Compiled per function with a target
// attribute (the library itself targets generic x86-64) and chosen at run time
// by kernel_path.cpp after checking CPUID. Same 16-lane summation
// order as the portable path (dense_kernels.h): lanes 0-7 live in one
// register, lanes 8-15 in another.
#include "tern/kernels/float_mode.h"  // first: see there
#include "tern/kernels/dense_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TERN_HAVE_AVX2_KERNELS 1
#include <immintrin.h>

#include <cstring>
#endif

namespace tern::detail {

#if TERN_HAVE_AVX2_KERNELS
#define TERN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace {

// Decodes 8 consecutive elements starting at element j of a row. Exact.
template <TensorFormat F>
TERN_AVX2 inline __m256 load8(const uint8_t* row, int64_t j) {
  if constexpr (F == TensorFormat::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + j);
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j * 2));
    if constexpr (F == TensorFormat::BF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

template <TensorFormat F>
constexpr int64_t element_bytes() {
  return F == TensorFormat::F32 ? 4 : 2;
}

// Elements [j, j + n), n < 8, padded with zeros: the tail of a row is one more
// (partial) step of the same lane pattern, so no scalar epilogue is needed.
template <TensorFormat F>
TERN_AVX2 inline __m256 load_partial(const uint8_t* row, int64_t j, int64_t n) {
  alignas(32) uint8_t buf[32] = {};
  std::memcpy(buf, row + j * element_bytes<F>(), static_cast<size_t>(n * element_bytes<F>()));
  return load8<F>(buf, 0);
}

TERN_AVX2 inline float fold(__m256 lanes_0_7, __m256 lanes_8_15) {
  __m256 s = _mm256_add_ps(lanes_0_7, lanes_8_15);                                // s0..s7
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));  // s_l + s_l+4
  __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));  // (s0+s4)+(s2+s6), (s1+s5)+(s3+s7)
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

struct Avx2Tiles {
  template <TensorFormat F, int R, int T>
  TERN_AVX2 static void tile(const uint8_t* w, int64_t w_stride, const float* x, int64_t ldx,
                             int64_t cols, float* y, int64_t ldy) {
    __m256 acc0[R][T], acc1[R][T];  // lanes 0-7 and 8-15 of each dot
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc0[r][t] = acc1[r][t] = _mm256_setzero_ps();
    // The rows after this tile are read next; a row of a typical matrix is
    // about one 4 KiB page, where hardware prefetchers stop, so fetch them
    // now. Measured on the 2048x768 BF16 matvec streaming from DRAM: 18 ->
    // 33 GB/s on one thread (lm head 151936x2048: 18.5 -> 29 GB/s); fetching
    // 2 or 4 tiles ahead was no better.
    const uint8_t* next_rows = w + R * w_stride;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(next_rows + r * w_stride + j * element_bytes<F>()),
                     _MM_HINT_T0);
      for (int r = 0; r < R; ++r) {
        __m256 w0 = load8<F>(w + r * w_stride, j);
        __m256 w1 = load8<F>(w + r * w_stride, j + 8);
        for (int t = 0; t < T; ++t) {
          acc0[r][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + j), acc0[r][t]);
          acc1[r][t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * ldx + j + 8), acc1[r][t]);
        }
      }
    }
    // Tail: at most one full 8-step (lanes 0-7) and one partial step (lanes
    // 8-15 if the full step happened, else 0-7): element j -> lane j % 16.
    int64_t left = cols - j;
    bool second_half = false;
    if (left >= 8) {
      for (int r = 0; r < R; ++r) {
        __m256 w0 = load8<F>(w + r * w_stride, j);
        for (int t = 0; t < T; ++t)
          acc0[r][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + j), acc0[r][t]);
      }
      j += 8;
      left -= 8;
      second_half = true;
    }
    if (left > 0) {
      __m256 xp[T];
      for (int t = 0; t < T; ++t)
        xp[t] = load_partial<TensorFormat::F32>(reinterpret_cast<const uint8_t*>(x + t * ldx), j, left);
      for (int r = 0; r < R; ++r) {
        __m256 wp = load_partial<F>(w + r * w_stride, j, left);
        for (int t = 0; t < T; ++t) {
          if (second_half) acc1[r][t] = _mm256_fmadd_ps(wp, xp[t], acc1[r][t]);
          else acc0[r][t] = _mm256_fmadd_ps(wp, xp[t], acc0[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ldy + r] = fold(acc0[r][t], acc1[r][t]);
  }
};

void gemm_rows(const RowsRef& w, int64_t row_begin, int64_t row_end, const float* x, int64_t ldx,
               int64_t n_tokens, float* y, int64_t ldy) {
  gemm_rows_dispatch<Avx2Tiles>(w, row_begin, row_end, x, ldx, n_tokens, y, ldy);
}

float dot(const float* a, const float* b, int64_t n) {
  float result;
  Avx2Tiles::tile<TensorFormat::F32, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, b, 0, n,
                                           &result, 0);
  return result;
}

TERN_AVX2 inline void axpy_inline(float a, const float* x, float* y, int64_t n) {
  __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  if (i < n) {  // same fused step on a zero-padded copy, so every element rounds alike
    alignas(32) float xb[8] = {}, yb[8] = {};
    std::memcpy(xb, x + i, static_cast<size_t>(n - i) * 4);
    std::memcpy(yb, y + i, static_cast<size_t>(n - i) * 4);
    _mm256_store_ps(yb, _mm256_fmadd_ps(va, _mm256_load_ps(xb), _mm256_load_ps(yb)));
    std::memcpy(y + i, yb, static_cast<size_t>(n - i) * 4);
  }
}

TERN_AVX2 void axpy(float a, const float* x, float* y, int64_t n) { axpy_inline(a, x, y, n); }

// H outputs x NB*8 dims held in registers while every row streams past; the
// last 1-7 dims go through masked loads (masked lanes read nothing).
template <bool Masked>
TERN_AVX2 inline __m256 load_columns(const float* p, __m256i mask) {
  if constexpr (Masked) return _mm256_maskload_ps(p, mask);
  else return _mm256_loadu_ps(p);
}

template <int H, int NB, bool Masked>
TERN_AVX2 void weighted_block(const float* weights, int64_t ldw, const float* rows, int64_t ldr,
                              int64_t n_rows, float* out, int64_t ldo, __m256i mask) {
  auto load = [mask](const float* p) TERN_AVX2 { return load_columns<Masked>(p, mask); };
  __m256 acc[H][NB];
  for (int h = 0; h < H; ++h)
    for (int b = 0; b < NB; ++b) acc[h][b] = load(out + h * ldo + 8 * b);
  for (int64_t p = 0; p < n_rows; ++p) {
    __m256 v[NB];
    for (int b = 0; b < NB; ++b) v[b] = load(rows + p * ldr + 8 * b);
    for (int h = 0; h < H; ++h) {
      __m256 w = _mm256_broadcast_ss(weights + h * ldw + p);
      for (int b = 0; b < NB; ++b) acc[h][b] = _mm256_fmadd_ps(w, v[b], acc[h][b]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int b = 0; b < NB; ++b) {
      if constexpr (Masked) _mm256_maskstore_ps(out + h * ldo + 8 * b, mask, acc[h][b]);
      else _mm256_storeu_ps(out + h * ldo + 8 * b, acc[h][b]);
    }
}

template <int NB, bool Masked>
TERN_AVX2 void weighted_columns(const float* weights, int64_t ldw, int64_t n_out, const float* rows,
                                int64_t ldr, int64_t n_rows, float* out, int64_t ldo, __m256i mask) {
  int64_t o = 0;
  for (; o + 4 <= n_out; o += 4)
    weighted_block<4, NB, Masked>(weights + o * ldw, ldw, rows, ldr, n_rows, out + o * ldo, ldo, mask);
  const float* w = weights + o * ldw;
  float* y = out + o * ldo;
  switch (n_out - o) {
    case 3: return weighted_block<3, NB, Masked>(w, ldw, rows, ldr, n_rows, y, ldo, mask);
    case 2: return weighted_block<2, NB, Masked>(w, ldw, rows, ldr, n_rows, y, ldo, mask);
    case 1: return weighted_block<1, NB, Masked>(w, ldw, rows, ldr, n_rows, y, ldo, mask);
    default: return;
  }
}

// Each output element is the same chain of fused steps as repeated axpy;
// only the loop order differs: columns of 16 dims x 4 outputs stay in
// registers over all rows. Measured on attention at 4096 positions, 32/4
// heads, head_dim 128 (one thread): per-head axpy loops 1.67 ms; rows-outer
// axpy over a group ~0.6 ms; this ~0.3 ms.
TERN_AVX2 void weighted_rows(const float* weights, int64_t ldw, int64_t n_out, const float* rows,
                             int64_t ldr, int64_t n_rows, int64_t dim, float* out) {
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t d = 0;
  for (; d + 16 <= dim; d += 16)
    weighted_columns<2, false>(weights, ldw, n_out, rows + d, ldr, n_rows, out + d, dim, all);
  if (d + 8 <= dim) {
    weighted_columns<1, false>(weights, ldw, n_out, rows + d, ldr, n_rows, out + d, dim, all);
    d += 8;
  }
  if (d < dim) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(dim - d)), lane);
    weighted_columns<1, true>(weights, ldw, n_out, rows + d, ldr, n_rows, out + d, dim, mask);
  }
}

}  // namespace

const DenseKernels* avx2_dense_kernels() {
  static const DenseKernels kernels{gemm_rows, dot, axpy, weighted_rows};
  return &kernels;
}

#else

const DenseKernels* avx2_dense_kernels() { return nullptr; }

#endif

}  // namespace tern::detail
