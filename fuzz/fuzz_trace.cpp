// Fuzz target "trace": the input is a routing trace (JSON Lines, one token
// per line; docs/TRACES.md). Reading must give a clean tern::Error or a
// trace. Every line the fast scanner takes, nlohmann must read the same way
// (the scanner may only ever be a shortcut). A trace that reads replays
// under every policy and pinning rule with hits + misses = demands, and
// nothing beats belady when the whole batch is pinned.
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "tern/experts/policy_sim.h"
#include "tern/experts/routing_trace.h"

namespace tern::fuzz {

void fuzz_trace(std::span<const uint8_t> input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  for (std::string_view rest = text; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    std::vector<uint32_t> lengths, json_lengths;
    std::vector<int32_t> ids, json_ids;
    if (!detail::scan_trace_line(line, lengths, ids)) continue;
    try {
      detail::parse_trace_line_json(line, "line", json_lengths, json_ids);
    } catch (const Error& e) {
      broken(std::string("the scanner took a line nlohmann rejects: ") + e.what());
    }
    if (lengths != json_lengths || ids != json_ids)
      broken("the scanner and nlohmann read a line differently");
  }
  run_expecting_clean_errors([&] {
    const RoutingTrace trace = parse_routing_trace(text, "trace.jsonl");
    const ReplayAccesses a = prepare_replay(trace);
    const auto widest = static_cast<int64_t>(std::max<uint64_t>(1, a.widest));
    for (int64_t capacity : {widest, widest + 1, 2 * widest + 3}) {
      uint64_t best = 0;
      std::vector<uint64_t> hits;
      for (ReplayPolicy p : all_replay_policies()) {
        const ReplayResult r = replay(a, p, ReplayOptions{capacity});
        if (r.hits + r.misses != a.accesses()) broken("replay lost or invented demands");
        hits.push_back(r.hits);
        if (p == ReplayPolicy::Belady) best = r.hits;
      }
      for (uint64_t h : hits)
        if (h > best) broken("a policy beat belady");
    }
  });
}

}  // namespace tern::fuzz
