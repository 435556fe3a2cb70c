#pragma once
// install_model — repacks a Hugging Face checkpoint into a .tern container
// (see format/tern_manifest.h for the layout). Streams tensor by tensor with
// bounded buffers, writes into a temporary directory beside the output and
// renames it into place only after manifest.json is written, so an
// interrupted install never leaves something that looks complete.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "tern/core/tensor_format.h"
#include "tern/format/tern_manifest.h"

namespace tern {

struct InstallOptions {
  std::filesystem::path source;  // Hugging Face model directory
  std::filesystem::path output;  // the .tern directory to create
  bool force = false;            // replace an existing output
  bool quiet = false;            // no progress output
  int threads = 0;               // converting threads; 0 = every core
  // Read the checkpoint with O_DIRECT where its file system allows it (no
  // page-cache copy); false reads through the page cache (dropped behind).
  bool direct_reads = true;
  // Storage formats; nullopt keeps each tensor's source dtype. Norms, biases
  // and router weights (1-D tensors, routers) are stored as F32 whenever a
  // format is requested.
  std::optional<TensorFormat> expert_format;
  std::optional<TensorFormat> trunk_format;
  // With fallback, a tensor whose rows do not divide the block size of the
  // requested format gets the nearest format that fits (q4_k -> q4_0,
  // q6_k -> q8_0, then the source dtype), with a note; without, it is an
  // error. The CLI enables it for defaulted formats only.
  bool expert_fallback = false;
  bool trunk_fallback = false;
  // Experts shipped as MXFP4 (gpt_oss as released) are repacked bit-exact
  // into Tern's MXFP4 when expert_format is nullopt or MXFP4, or when this
  // is set whatever expert_format says (the CLI sets it unless --expert-quant
  // is given). Otherwise they are dequantized exactly and quantized to
  // expert_format. Vectors in expert records (biases) are always F32.
  bool keep_mxfp4_experts = false;
};

struct InstallResult {
  Manifest manifest;
  uint64_t bytes_written = 0;
  double seconds = 0;
};

InstallResult install_model(const InstallOptions& options);

}  // namespace tern
