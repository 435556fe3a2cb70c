// Format dispatch for quantize_row / dequantize_row (tern/quant/quantize.h).
#include "tern/quant/quantize.h"

#include "tern/core/error.h"

namespace tern {

bool is_quantized(TensorFormat format) {
  switch (format) {
    case TensorFormat::Q8_0:
    case TensorFormat::Q4_0:
    case TensorFormat::Q4_K:
    case TensorFormat::Q6_K:
    case TensorFormat::MXFP4: return true;
    default: return false;
  }
}

namespace {

bool is_float_format(TensorFormat f) {
  return f == TensorFormat::F32 || f == TensorFormat::F16 || f == TensorFormat::BF16;
}

void check_float_row(TensorFormat format, int64_t n, const char* what) {
  if (!is_float_format(format))
    fail("{}: format '{}' holds no float or quantized values", what, format_name(format));
  if (n < 0) fail("{}: negative row length {}", what, n);
}

}  // namespace

void quantize_row(TensorFormat format, const float* x, void* out, int64_t n) {
  switch (format) {
    case TensorFormat::Q8_0: return quantize_row_q8_0(x, out, n);
    case TensorFormat::Q4_0: return quantize_row_q4_0(x, out, n);
    case TensorFormat::Q4_K: return quantize_row_q4_k(x, out, n);
    case TensorFormat::Q6_K: return quantize_row_q6_k(x, out, n);
    case TensorFormat::MXFP4: return quantize_row_mxfp4(x, out, n);
    default:
      check_float_row(format, n, "quantize_row");
      convert_elements(x, TensorFormat::F32, out, format, static_cast<size_t>(n));
  }
}

void dequantize_row(TensorFormat format, const void* in, float* y, int64_t n) {
  switch (format) {
    case TensorFormat::Q8_0: return dequantize_row_q8_0(in, y, n);
    case TensorFormat::Q4_0: return dequantize_row_q4_0(in, y, n);
    case TensorFormat::Q4_K: return dequantize_row_q4_k(in, y, n);
    case TensorFormat::Q6_K: return dequantize_row_q6_k(in, y, n);
    case TensorFormat::MXFP4: return dequantize_row_mxfp4(in, y, n);
    default:
      check_float_row(format, n, "dequantize_row");
      convert_elements(in, format, y, TensorFormat::F32, static_cast<size_t>(n));
  }
}

int64_t row_bytes(TensorFormat format, int64_t n) {
  if (!is_quantized(format)) check_float_row(format, n, "row_bytes");
  return static_cast<int64_t>(format_bytes(format, {n}));
}

}  // namespace tern
