#include "tern/install/section_convert.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/quant/quantize.h"

namespace tern {

namespace {

// A thread takes at least this many source bytes of rows at a time.
constexpr uint64_t kMinBytesPerThread = 256ull << 10;
// Elements converted per call when rows are consecutive (bounds the float scratch).
constexpr int64_t kConvertChunkElements = 16 << 10;
// Transposing: section rows gathered per tile. A tile reads, from each
// source row ([in] index), kTileRows x row_step contiguous elements (512 B
// of BF16 gate or up columns: whole cache lines, sequential within a row,
// every line used by one tile only) and writes kTileRows rows of F32 (1.4
// MiB for a 2880-wide row), which are then quantized row by row.
constexpr int64_t kTileRows = 128;

uint64_t element_bytes(TensorFormat f) { return format_info(f).block_bytes; }

// Converts one row of `n` elements.
void convert_row(const uint8_t* src, TensorFormat from, uint8_t* dst, TensorFormat to, int64_t n,
                 std::vector<float>& f32) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<uint64_t>(format_bytes(from, {n})));
  } else if (!is_quantized(to)) {
    convert_elements(src, from, dst, to, static_cast<uint64_t>(n));
  } else {
    f32.resize(static_cast<size_t>(n));
    convert_elements(src, from, f32.data(), TensorFormat::F32, static_cast<uint64_t>(n));
    quantize_row(to, f32.data(), dst, n);
  }
}

// Calls fn(load) with a loader of `from` elements as float: load(p, i) is
// element i of p.
template <typename Fn>
void with_loader(TensorFormat from, Fn&& fn) {
  switch (from) {
    case TensorFormat::F32:
      return fn([](const uint8_t* p, int64_t i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
      });
    case TensorFormat::BF16:
      return fn([](const uint8_t* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        return v;
      });
    case TensorFormat::F16:
      return fn([](const uint8_t* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return f16_to_f32(h);
      });
    default:
      fail("cannot transpose {} elements", format_name(from));
  }
}

void convert_float(const SectionConversion& c, const uint8_t* data, uint8_t* out, ThreadPool& pool) {
  const uint64_t esz = element_bytes(c.from);
  const auto out_row = static_cast<uint64_t>(format_bytes(c.to, {c.cols}));
  if (!c.transposed) {
    if (c.row_step == 1) {  // whole consecutive rows
      convert_rows(data + static_cast<uint64_t>(c.row_start * c.cols) * esz, c.from, out, c.to, c.rows, c.cols, pool);
      return;
    }
    const auto min_rows = static_cast<int64_t>(
        std::max<uint64_t>(1, kMinBytesPerThread / std::max<uint64_t>(1, static_cast<uint64_t>(c.cols) * esz)));
    pool.parallel_for(c.rows, min_rows, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> f32;
      for (int64_t r = begin; r < end; ++r) {
        const int64_t src = c.row_start + r * c.row_step;
        convert_row(data + static_cast<uint64_t>(src * c.cols) * esz, c.from, out + static_cast<uint64_t>(r) * out_row,
                    c.to, c.cols, f32);
      }
    });
    return;
  }
  // Transposed: the source is [cols][src_rows]; section row r is source column row_start + r * row_step.
  with_loader(c.from, [&](auto load) {
    const int64_t tiles = (c.rows + kTileRows - 1) / kTileRows;
    pool.parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> tile;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t r0 = t * kTileRows, nr = std::min(kTileRows, c.rows - r0);
        tile.resize(static_cast<size_t>(nr * c.cols));
        float* dst = tile.data();
        const int64_t first = c.row_start + r0 * c.row_step;
        for (int64_t i = 0; i < c.cols; ++i) {
          const uint8_t* src = data + static_cast<uint64_t>(i * c.src_rows) * esz;
          for (int64_t rr = 0; rr < nr; ++rr) dst[rr * c.cols + i] = load(src, first + rr * c.row_step);
        }
        quantize_row(c.to, dst, out + static_cast<uint64_t>(r0) * out_row, nr * c.cols);  // rows back to back
      }
    });
  });
}

void convert_mxfp4(const SectionConversion& c, const uint8_t* blocks, const uint8_t* scales, uint8_t* out,
                   ThreadPool& pool) {
  const int64_t groups = c.cols / kQKMxfp4;
  const auto out_row = static_cast<uint64_t>(format_bytes(c.to, {c.cols}));
  const auto min_rows = std::max<int64_t>(1, static_cast<int64_t>(kMinBytesPerThread) / (groups * 17));
  pool.parallel_for(c.rows, min_rows, [&](int64_t begin, int64_t end) {
    thread_local std::vector<BlockMxfp4> repacked;
    thread_local std::vector<float> f32;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t src = c.row_start + r * c.row_step;
      const uint8_t* codes = blocks + static_cast<uint64_t>(src * groups) * 16;
      const uint8_t* exps = scales + static_cast<uint64_t>(src * groups);
      uint8_t* dst = out + static_cast<uint64_t>(r) * out_row;
      BlockMxfp4* row = nullptr;  // MXFP4 to another format: the repacked row, then requantized
      if (c.to != TensorFormat::MXFP4) {
        repacked.resize(static_cast<size_t>(groups));
        row = repacked.data();
      }
      for (int64_t g = 0; g < groups; ++g) {
        if (exps[g] == 255)
          fail("{}{}: row {} block {} has scale byte 255 (NaN in E8M0); refusing to install a corrupt MXFP4 tensor",
               c.source_name, c.expert >= 0 ? fmt::format(" expert {}", c.expert) : "", src, g);
        const BlockMxfp4 b = mxfp4_repack_block(codes + g * 16, exps[g]);
        if (row) row[g] = b;
        else std::memcpy(dst + g * sizeof(BlockMxfp4), &b, sizeof b);
      }
      if (row) {
        f32.resize(static_cast<size_t>(c.cols));
        dequantize_row(TensorFormat::MXFP4, row, f32.data(), c.cols);
        quantize_row(c.to, f32.data(), dst, c.cols);
      }
    }
  });
}

// e4m3_to_f32 for every code.
struct E4m3Table {
  float value[256];
  E4m3Table() {
    for (int b = 0; b < 256; ++b) {
      const int e = (b >> 3) & 15, m = b & 7;
      float v = e == 0 ? std::ldexp(static_cast<float>(m), -9)  // subnormal: m/8 x 2^-6
                       : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
      if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
      value[b] = (b & 0x80) ? -v : v;
    }
  }
};
const E4m3Table kE4m3;

}  // namespace

float e4m3_to_f32(uint8_t code) { return kE4m3.value[code]; }

void convert_fp8_rows(const uint8_t* codes, const Fp8Scales& s, uint8_t* out, TensorFormat to, int64_t rows,
                      int64_t cols, ThreadPool& pool) {
  const int64_t scale_cols = (cols + s.block_cols - 1) / s.block_cols;
  const uint64_t scale_bytes = element_bytes(s.format);
  const auto out_row = static_cast<uint64_t>(format_bytes(to, {cols}));
  const int64_t first_block = s.first_row / s.block_rows;
  const auto min_rows = static_cast<int64_t>(std::max<uint64_t>(1, kMinBytesPerThread / static_cast<uint64_t>(cols)));
  with_loader(s.format, [&](auto load_scale) {
    pool.parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> f32, tmp, scale;
      f32.resize(static_cast<size_t>(cols));
      scale.resize(static_cast<size_t>(scale_cols));
      for (int64_t r = begin; r < end; ++r) {
        const int64_t src = s.first_row + r;
        const uint8_t* srow = s.scales + static_cast<uint64_t>((src / s.block_rows - first_block) * scale_cols) * scale_bytes;
        for (int64_t b = 0; b < scale_cols; ++b) {
          scale[b] = load_scale(srow, b);
          if (!std::isfinite(scale[b]))
            fail("{}_scale_inv: block ({}, {}) is {}; refusing to install a corrupt FP8 tensor", s.tensor,
                 src / s.block_rows, b, scale[b]);
        }
        const uint8_t* crow = codes + static_cast<uint64_t>(r * cols);
        for (int64_t c = 0; c < cols; ++c) {
          const float v = kE4m3.value[crow[c]];
          if (std::isnan(v))
            fail("{}: row {} column {} is an FP8 NaN (byte {:#04x}); refusing to install a corrupt FP8 tensor",
                 s.tensor, src, c, crow[c]);
          f32[c] = v * scale[c / s.block_cols];
        }
        convert_row(reinterpret_cast<const uint8_t*>(f32.data()), TensorFormat::F32,
                    out + static_cast<uint64_t>(r) * out_row, to, cols, tmp);
      }
    });
  });
}

void convert_rows(const uint8_t* in, TensorFormat from, uint8_t* out, TensorFormat to, int64_t rows, int64_t row,
                  ThreadPool& pool) {
  const auto in_row = static_cast<uint64_t>(format_bytes(from, {row}));
  const auto out_row = static_cast<uint64_t>(format_bytes(to, {row}));
  const auto min_rows = static_cast<int64_t>(std::max<uint64_t>(1, kMinBytesPerThread / std::max<uint64_t>(1, in_row)));
  pool.parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
    const uint8_t* src = in + static_cast<uint64_t>(begin) * in_row;
    uint8_t* dst = out + static_cast<uint64_t>(begin) * out_row;
    if (from == to) {
      std::memcpy(dst, src, static_cast<uint64_t>(end - begin) * in_row);
    } else if (!is_quantized(to)) {
      convert_elements(src, from, dst, to, static_cast<uint64_t>((end - begin) * row));
    } else {
      // Consecutive rows are consecutive blocks in and out, so several go
      // through one call: the AVX-512 Q4_K quantizer fits 8 super-blocks at
      // once, fewer only at a row's tail (a 512-wide row has 2).
      thread_local std::vector<float> f32;
      const int64_t chunk = std::max<int64_t>(1, kConvertChunkElements / row);
      for (int64_t r = begin; r < end; r += chunk) {
        const int64_t k = std::min(chunk, end - r);
        convert_row(src, from, dst, to, k * row, f32);
        src += static_cast<uint64_t>(k) * in_row;
        dst += static_cast<uint64_t>(k) * out_row;
      }
    }
  });
}

void convert_section(const SectionConversion& c, const uint8_t* in, uint8_t* out, ThreadPool& pool) {
  uint8_t* dst = out + c.out_offset;
  if (c.encoding == TensorEncoding::Mxfp4Blocks) {
    convert_mxfp4(c, in + c.data_offset, in + c.scales_offset, dst, pool);
  } else if (c.fp8_block_rows > 0) {
    if (c.transposed || c.row_start != 0 || c.row_step != 1 || c.rows != c.src_rows)
      fail("{}: FP8 sources are read as whole [out, in] matrices", c.source_name);
    Fp8Scales s{in + c.scales_offset, c.fp8_scale_format, c.fp8_block_rows, c.fp8_block_cols, 0,
                c.expert >= 0 ? fmt::format("{} expert {}", c.source_name, c.expert) : c.source_name};
    convert_fp8_rows(in + c.data_offset, s, dst, c.to, c.rows, c.cols, pool);
  } else {
    convert_float(c, in + c.data_offset, dst, pool);
  }
}

}  // namespace tern
