#pragma once
// Each `tern <command>` lives in its own cmd_<name>.cpp and registers itself
// on the root CLI11 app through one of these functions. Commands throw
// tern::Error; main() prints it and exits 1.
#include <CLI/CLI.hpp>

namespace tern::cli {

void add_install_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace tern::cli
