// tern — command-line front end. Thin: parses flags, calls the library.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "tern/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Tern: run mixture-of-experts models larger than memory, streaming experts from disk"};
  app.set_version_flag("--version", std::string("tern ") + TERN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  tern::cli::add_install_command(app);
  tern::cli::add_verify_command(app);
  tern::cli::add_info_command(app);
  tern::cli::add_synth_command(app);
  tern::cli::add_tokenize_command(app);
  tern::cli::add_chat_command(app);
  tern::cli::add_generate_command(app);
  tern::cli::add_logits_command(app);
  tern::cli::add_quantize_command(app);
  tern::cli::add_compare_command(app);
  tern::cli::add_bench_command(app);
  tern::cli::add_trace_command(app);
  tern::cli::add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tern::Error& e) {
    std::fprintf(stderr, "tern: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tern: error: out of memory (lower --ram or --ctx)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tern: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
