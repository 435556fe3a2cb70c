#include "tern/kernels/weight_view.h"

#include <cstring>

#include "tern/core/error.h"
#include "tern/kernels/convert.h"
#include "tern/quant/quantize.h"

namespace tern {

bool weight_format_supported(TensorFormat format) {
  switch (format) {
    case TensorFormat::F32:
    case TensorFormat::F16:
    case TensorFormat::BF16:
    case TensorFormat::Q8_0:
    case TensorFormat::Q4_0:
    case TensorFormat::Q4_K:
    case TensorFormat::Q6_K:
    case TensorFormat::MXFP4: return true;
    default: return false;
  }
}

void check_weight_view(const WeightView& w, const char* what) {
  if (!weight_format_supported(w.format))
    fail("{}: weight format '{}' is not supported by the kernels (f32, f16, bf16, q8_0, q4_0, "
         "q4_k, q6_k, mxfp4)",
         what, format_name(w.format));
  if (w.rows < 0 || w.cols < 0) fail("{}: negative weight shape [{}, {}]", what, w.rows, w.cols);
  const TensorFormatInfo& info = format_info(w.format);
  if (w.cols % info.block_elements != 0)
    fail("{}: weight shape [{}, {}]: {} columns is not a multiple of the {} block size {}", what,
         w.rows, w.cols, w.cols, info.name, info.block_elements);
  if (w.data == nullptr && w.rows > 0 && w.cols > 0)
    fail("{}: null weight data for shape [{}, {}]", what, w.rows, w.cols);
}

int64_t weight_row_bytes(const WeightView& w) {
  // Any format with a size table entry: rows of block formats are whole blocks.
  const TensorFormatInfo& info = format_info(w.format);
  if (w.cols < 0) fail("weight_row_bytes: negative column count {}", w.cols);
  if (w.cols % info.block_elements != 0)
    fail("weight_row_bytes: {} columns is not a multiple of the {} block size {}", w.cols,
         info.name, info.block_elements);
  return w.cols / info.block_elements * static_cast<int64_t>(info.block_bytes);
}

WeightView weight_rows(const WeightView& w, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0 || begin > w.rows || count > w.rows - begin)
    fail("weight_rows: rows [{}, {}) out of range for {} rows", begin, begin + count, w.rows);
  WeightView sub = w;
  sub.rows = count;
  if (w.data != nullptr) sub.data = static_cast<const uint8_t*>(w.data) + begin * weight_row_bytes(w);
  return sub;
}

void dequantize_row(const WeightView& w, int64_t row, float* out) {
  check_weight_view(w, "dequantize_row");
  if (row < 0 || row >= w.rows) fail("dequantize_row: row {} out of range [0, {})", row, w.rows);
  const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * weight_row_bytes(w);
  switch (w.format) {
    case TensorFormat::F32: std::memcpy(out, p, static_cast<size_t>(w.cols) * 4); return;
    case TensorFormat::BF16: convert_row<TensorFormat::BF16>(p, 0, w.cols, out); return;
    case TensorFormat::F16: convert_row<TensorFormat::F16>(p, 0, w.cols, out); return;
    default: break;
  }
  // Block formats (embeddings stored as Q8_0, ...): quant's reference decoder.
  tern::dequantize_row(w.format, p, out, w.cols);
}

}  // namespace tern
