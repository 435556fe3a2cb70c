#include "cli/commands.h"

namespace tern::cli {
void add_install_command(CLI::App& app) { (void)app; }
}  // namespace tern::cli
