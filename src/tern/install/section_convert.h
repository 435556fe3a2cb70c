#pragma once
// Conversions behind `tern install`: rows of a source (plain, picked with a
// start/step, transposed, or OpenAI's MXFP4 blocks) into rows of a storage
// format. Pure functions of bytes; rows are split across a thread pool.
#include <cstdint>
#include <string>

#include "tern/core/tensor_format.h"
#include "tern/format/architectures.h"
#include "tern/quant/blocks.h"

namespace tern {

class ThreadPool;

// Converts `rows` rows of `row` elements from `from` (source bytes, back to
// back) into `to` (F32/F16/BF16 element conversion, or quantize_row).
void convert_rows(const uint8_t* in, TensorFormat from, uint8_t* out, TensorFormat to, int64_t rows, int64_t row,
                  ThreadPool& pool);

// Fine-grained FP8 rows (ModelConfig::Fp8Blocks): F8_E4M3 codes [rows,
// cols], element (r, c) = e4m3(code) x scale[r / block_rows][c /
// block_cols] of a [ceil(rows / block_rows), ceil(cols / block_cols)] scale
// tensor, as DeepSeek's weight_dequant computes it.
struct Fp8Scales {
  const uint8_t* scales = nullptr;  // scale row first_row / block_rows onwards
  TensorFormat format = TensorFormat::F32;  // F32, BF16 or F16
  int64_t block_rows = 0, block_cols = 0;
  int64_t first_row = 0;          // the source row of the first converted row
  std::string tensor;             // for errors: the weight's name
};

// E4M3 (OCP "fn": bias 7, no infinities, S.1111.111 NaN) as float; exact.
float e4m3_to_f32(uint8_t code);

// Converts `rows` rows of `cols` FP8 codes into `to`. A NaN code or a
// non-finite scale is an error naming the tensor, row and column.
void convert_fp8_rows(const uint8_t* codes, const Fp8Scales& s, uint8_t* out, TensorFormat to, int64_t rows,
                      int64_t cols, ThreadPool& pool);

// One expert-record section made from its source slice (see SectionSource):
// section row r is row row_start + r * row_step of the source's [src_rows,
// cols] view.
struct SectionConversion {
  std::string source_name;  // for errors: the source tensor (MXFP4: the scales)
  int64_t expert = -1;      // for errors: the slice of a fused source, -1 if none
  TensorEncoding encoding = TensorEncoding::Float;  // Float or Mxfp4Blocks
  TensorFormat from = TensorFormat::F32;            // Float: the source's element type
  TensorFormat to = TensorFormat::F32;              // the section's storage format
  int64_t rows = 0, cols = 0;                       // the section, [rows, cols] (a vector is [n, 1])
  int64_t src_rows = 0;                             // rows of the source's [out, in] view
  bool transposed = false;                          // Float: stored [cols, src_rows]
  int64_t row_start = 0, row_step = 1;
  uint64_t data_offset = 0;    // of the source slice (MXFP4: blocks) in the input buffer
  uint64_t scales_offset = 0;  // MXFP4: of the scales slice
  uint64_t out_offset = 0;     // of the section in the record
  // Float from FP8 codes (the whole source, rows taken in order): the block
  // sizes and the scales' element type; the scales lie at scales_offset.
  int64_t fp8_block_rows = 0, fp8_block_cols = 0;
  TensorFormat fp8_scale_format = TensorFormat::F32;
};

// Fills out + c.out_offset from in. MXFP4 to MXFP4 is a bit-exact repack
// (mxfp4_repack_block); MXFP4 to another format dequantizes exactly, then
// quantizes. A scale byte of 255 (NaN in E8M0) is an error naming the
// tensor, expert, row and block.
void convert_section(const SectionConversion& c, const uint8_t* in, uint8_t* out, ThreadPool& pool);

// OpenAI/Hugging Face MXFP4 block (16 bytes of codes, element 2b in the low
// nibble of byte b, 2b + 1 in the high one; E8M0 scale byte, bias 127) ->
// ggml block_mxfp4, the same values exactly: e is the scale byte unchanged
// (ggml doubles its table and halves the scale), qs[j] = code(j) |
// code(j + 16) << 4 with code(k) = nibble k of the source. Callers refuse
// scale byte 255 first (docs/gpt_oss_facts.md §3).
inline BlockMxfp4 mxfp4_repack_block(const uint8_t* codes, uint8_t scale) {
  BlockMxfp4 b;
  b.e = scale;
  auto code = [codes](int k) { return static_cast<uint8_t>((codes[k >> 1] >> (4 * (k & 1))) & 0x0F); };
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(code(j) | code(j + 16) << 4);
  return b;
}

}  // namespace tern
