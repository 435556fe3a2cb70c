// tern verify <model.tern>: re-checks every checksum and size.
#include <fmt/format.h>

#include "cli/commands.h"
#include "tern/core/error.h"
#include "tern/core/progress.h"
#include "tern/core/units.h"
#include "tern/format/tern_model.h"

namespace tern::cli {

void add_verify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "Check every checksum and size of a .tern model");
  auto path = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("model", *path, ".tern model directory")->required();
  cmd->add_flag("-q,--quiet", *quiet, "No progress output");
  cmd->callback([path, quiet] {
    TernModel model = TernModel::open(*path);
    Progress progress("verify", model.verify_total_bytes(), *quiet);
    VerifyReport report = model.verify([&](uint64_t n) { progress.add(n); });
    progress.finish();
    for (const auto& issue : report.issues) fmt::print(stderr, "FAILED: {}\n", issue.message());
    if (!report.ok())
      fail("{}: {} problem(s) found in {} checked; reinstall the model", *path, report.issues.size(),
           format_bytes(report.bytes_checked));
    fmt::print("{}: OK ({} trunk tensors, {} experts, {} files, {} checked)\n", *path,
               report.trunk_tensors, report.experts, report.files, format_bytes(report.bytes_checked));
  });
}

}  // namespace tern::cli
