// tern quantize-row (hidden, for developers and tests/reference/test_gguf_quants.py):
// quantizes a raw little-endian float32 file into raw blocks of a format, or
// dequantizes raw blocks back to float32 with --dequantize. The file is one
// row; blocks are independent, so concatenated rows give the same bytes.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/tensor_format.h"
#include "tern/quant/quantize.h"

namespace tern::cli {

namespace {

struct QuantizeRowArgs {
  std::string format;
  std::string input;
  std::string output;
  bool dequantize = false;
};

// Geometry of the --format value: a TensorFormat, or "q8_k" (the activation format).
struct RowFormat {
  std::string name;
  bool is_q8_k = false;
  TensorFormat format = TensorFormat::F32;
  int64_t block_elements = 1;
  int64_t block_bytes = 4;
};

RowFormat parse_row_format(const std::string& name) {
  RowFormat f;
  f.name = name;
  if (name == "q8_k") {
    f.is_q8_k = true;
    f.block_elements = kQK_K;
    f.block_bytes = sizeof(BlockQ8K);
    return f;
  }
  f.format = parse_tensor_format(name);
  if (f.format == TensorFormat::U8 || f.format == TensorFormat::I8)
    fail("quantize-row: format '{}' holds no float values", name);
  f.block_elements = format_info(f.format).block_elements;
  f.block_bytes = format_info(f.format).block_bytes;
  return f;
}

void run_quantize_row(const QuantizeRowArgs& args) {
  const RowFormat f = parse_row_format(args.format);
  const std::string in = read_text_file(args.input);
  const auto in_bytes = static_cast<int64_t>(in.size());
  std::string out;
  if (!args.dequantize) {
    if (in_bytes % 4 != 0)
      fail("{}: {} bytes is not a whole number of float32 values", args.input, in_bytes);
    const int64_t n = in_bytes / 4;
    if (n % f.block_elements != 0)
      fail("{}: row length {} is not a multiple of the {} block size {}", args.input, n, f.name,
           f.block_elements);
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), in.data(), in.size());
    out.resize(static_cast<size_t>(n / f.block_elements * f.block_bytes));
    if (f.is_q8_k)
      quantize_row_q8_k(x.data(), out.data(), n);
    else
      quantize_row(f.format, x.data(), out.data(), n);
  } else {
    if (in_bytes % f.block_bytes != 0)
      fail("{}: {} bytes is not a whole number of {}-byte {} blocks", args.input, in_bytes,
           f.block_bytes, f.name);
    const int64_t n = in_bytes / f.block_bytes * f.block_elements;
    std::vector<float> y(static_cast<size_t>(n));
    if (f.is_q8_k)
      dequantize_row_q8_k(in.data(), y.data(), n);
    else
      dequantize_row(f.format, in.data(), y.data(), n);
    out.assign(reinterpret_cast<const char*>(y.data()), y.size() * sizeof(float));
  }
  write_file_atomic(args.output, out);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize-row",
                                 "Quantize raw float32 into raw blocks of a format, or back");
  cmd->group("");  // developer tool: not listed in --help
  auto args = std::make_shared<QuantizeRowArgs>();
  cmd->add_option("--format", args->format,
                  "q8_0, q4_0, q4_k, q6_k, mxfp4, q8_k, or f32 / f16 / bf16")
      ->required();
  cmd->add_option("--input", args->input, "raw little-endian float32 (or blocks with --dequantize)")
      ->required();
  cmd->add_option("--output", args->output, "where to write the blocks (or float32)")->required();
  cmd->add_flag("--dequantize", args->dequantize, "read blocks, write float32");
  cmd->callback([args] { run_quantize_row(*args); });
}

}  // namespace tern::cli
