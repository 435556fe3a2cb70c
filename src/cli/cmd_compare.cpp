// tern compare <a.tern> <b.tern> (--prompt T | --tokens …): how far install b
// (e.g. quantized) is from install a (e.g. unquantized) on the same tokens.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/runtime/compare.h"

namespace tern::cli {

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Compare two installs of one model (hidden states, routing, next-token KL)");
  struct Flags {
    EngineFlags engine;  // its positional `model` is the reference (a)
    std::string candidate;
    PromptFlags prompt;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  f->engine.add(cmd);
  cmd->add_option("candidate", f->candidate, "The .tern install judged against the first")->required();
  f->prompt.add(cmd);
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f] {
    EngineOptions oa = f->engine.options();
    EngineOptions ob = oa;
    ob.model = f->candidate;
    Engine a(oa), b(ob);
    std::vector<int32_t> ids = f->prompt.ids(a);
    ModelComparison r = compare_models(a, b, ids);
    if (f->json) {
      fmt::print("{}\n", r.to_json().dump(2));
      return;
    }
    fmt::print("{} vs {} over {} positions\n", f->engine.model, f->candidate, r.positions);
    fmt::print("{:>5}  {:>12}  {:>10}  {:>10}  {:>15}\n", "layer", "rel. error", "min cos", "mean cos", "router differs");
    for (const auto& l : r.layers)
      fmt::print("{:>5}  {:>12.3e}  {:>10.6f}  {:>10.6f}  {:>15}\n", l.layer, l.relative_error, l.min_cosine,
                 l.mean_cosine, l.router_mismatch < 0 ? std::string("dense") : fmt::format("{:.2f}%", 100 * l.router_mismatch));
    fmt::print("next token: KL mean {:.3e} nats, max {:.3e}; top-1 agreement {:.1f}%\n", r.mean_kl, r.max_kl,
               100 * r.top1_agreement);
  });
}

}  // namespace tern::cli
