// tern install <hf-model-dir> -o <out.tern> [--force] [--expert-quant F] [--trunk-quant F]
#include <fmt/format.h>

#include "cli/commands.h"
#include "tern/core/units.h"
#include "tern/install/installer.h"

namespace tern::cli {

void add_install_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("install", "Repack a Hugging Face checkpoint into a .tern model");
  auto opt = std::make_shared<InstallOptions>();
  auto expert_fmt = std::make_shared<std::string>();
  auto trunk_fmt = std::make_shared<std::string>();
  cmd->add_option("source", opt->source, "Hugging Face model directory (config.json + safetensors)")
      ->required();
  cmd->add_option("-o,--output", opt->output, "Output .tern directory")->required();
  cmd->add_flag("--force", opt->force, "Replace the output if it exists");
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress output");
  cmd->add_option("--threads", opt->threads, "Threads converting and quantizing (default: every core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("!--buffered-reads", opt->direct_reads,
                "Read the checkpoint through the page cache (default: O_DIRECT where the file system allows it)");
  cmd->add_option("--expert-quant,--expert-format", *expert_fmt,
                  "Store routed experts as q4_k|q4_0|q8_0|q6_k|mxfp4|bf16|f16|f32|source (default: q4_k; tensors whose rows do "
                  "not fit 256-blocks fall back to q4_0; experts shipped as MXFP4 stay MXFP4, bit-exact, unless a "
                  "format is given)");
  cmd->add_option("--trunk-quant,--trunk-format", *trunk_fmt,
                  "Store trunk matrices as q8_0|q4_k|q4_0|bf16|f16|f32|source (default: q8_0); norms, biases and "
                  "routers stay F32");
  cmd->callback([opt, expert_fmt, trunk_fmt] {
    // Defaults as llama.cpp users expect of a local install: 4.5-bit experts
    // (the bytes read per token), 8-bit trunk; with per-tensor fallback.
    // An explicitly requested format that does not fit is an error instead.
    opt->expert_fallback = expert_fmt->empty();
    opt->keep_mxfp4_experts = expert_fmt->empty();
    opt->trunk_fallback = trunk_fmt->empty();
    auto pick = [](const std::string& flag, TensorFormat dflt) -> std::optional<TensorFormat> {
      if (flag == "source") return std::nullopt;
      return flag.empty() ? dflt : parse_tensor_format(flag);
    };
    opt->expert_format = pick(*expert_fmt, TensorFormat::Q4_K);
    opt->trunk_format = pick(*trunk_fmt, TensorFormat::Q8_0);
    InstallResult r = install_model(*opt);
    uint64_t experts = 0;
    for (const auto& l : r.manifest.expert_layers) experts += static_cast<uint64_t>(l.num_experts);
    fmt::print("installed {} ({}): trunk {} in {} tensors, experts {} in {} records, {:.1f}s\n",
               opt->output.string(), r.manifest.architecture, format_bytes(r.manifest.trunk_size),
               r.manifest.trunk.size(), format_bytes(r.manifest.experts_size), experts, r.seconds);
  });
}

}  // namespace tern::cli
