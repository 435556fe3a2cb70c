// tern logits <model> (--prompt TEXT | --tokens 1,2,3) [--top N] [--all] [--json]:
// next-token candidates, or the full logits of every position.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/commands.h"
#include "cli/engine_flags.h"

namespace tern::cli {

void add_logits_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Show next-token probabilities (or all logits) for a prompt");
  struct Flags {
    EngineFlags engine;
    PromptFlags prompt;
    int64_t top = 10;
    bool all = false;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  f->engine.add(cmd);
  f->prompt.add(cmd);
  cmd->add_option("--top", f->top, "Number of candidates to show")->default_val(10)->check(CLI::PositiveNumber);
  cmd->add_flag("--all", f->all, "Full logits vector for every position (with --json)");
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f] {
    Engine engine(f->engine.options());
    Session session(engine);
    std::vector<int32_t> ids = f->prompt.ids(engine);
    const int64_t vocab = engine.config().vocab_size;
    const std::vector<float>& logits = session.feed(ids, f->all);
    if (f->all) {
      nlohmann::json rows = nlohmann::json::array();
      for (size_t t = 0; t < ids.size(); ++t)
        rows.push_back(std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(t * vocab),
                                          logits.begin() + static_cast<std::ptrdiff_t>((t + 1) * vocab)));
      if (!f->json) fmt::print(stderr, "note: --all prints JSON\n");
      fmt::print("{}\n", nlohmann::json{{"tokens", ids}, {"logits", rows}}.dump());
      return;
    }
    // Softmax in double for display.
    const float* last = logits.data();
    double mx = *std::max_element(last, last + vocab), sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(last[i]) - mx);
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const auto k = static_cast<size_t>(std::min<int64_t>(f->top, vocab));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int32_t a, int32_t b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
    nlohmann::json top = nlohmann::json::array();
    for (size_t r = 0; r < k; ++r) {
      int32_t id = order[r];
      double p = std::exp(static_cast<double>(last[id]) - mx) / sum;
      std::string piece = engine.has_tokenizer() && engine.tokenizer().has_token(id) ? engine.tokenizer().token_piece(id) : "";
      if (f->json) {
        top.push_back({{"id", id}, {"piece", piece}, {"logit", last[id]}, {"prob", p}});
      } else {
        fmt::print("{:>3}. {:>8}  p={:.4f}  logit={:+.4f}  {}\n", r + 1, id, p, last[id],
                   nlohmann::json(piece).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      }
    }
    if (f->json)
      fmt::print("{}\n", nlohmann::json{{"tokens", ids}, {"top", top}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

}  // namespace tern::cli
