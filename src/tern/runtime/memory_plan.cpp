#include "tern/runtime/memory_plan.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/core/units.h"

namespace tern {

MemoryPlan plan_memory(const MemoryNeeds& n) {
  MemoryPlan p;
  p.usable = n.cgroup_limit > 0 ? std::min(n.available, n.cgroup_limit) : n.available;
  p.margin = p.usable / 20 + (64ull << 20);
  const uint64_t fixed = n.trunk + n.kv + n.scratch + p.margin;
  const uint64_t room = p.usable > fixed ? p.usable - fixed : 0;
  if (room < n.min_budget)
    fail("--ram auto: {} usable ({}), but the trunk ({}), KV cache ({}), scratch ({}) and margin ({}) leave {} for "
         "experts, below the minimum of {}; free memory, lower --ctx, or give --ram explicitly",
         format_bytes(p.usable), n.cgroup_limit > 0 ? "cgroup limit" : "MemAvailable", format_bytes(n.trunk),
         format_bytes(n.kv), format_bytes(n.scratch), format_bytes(p.margin), format_bytes(room),
         format_bytes(n.min_budget));
  p.budget = std::min(room, n.all_experts);
  p.all_resident = p.budget >= n.all_experts;
  p.text = fmt::format(
      "memory plan: {} usable ({}); resident: trunk {}, KV {}, scratch {}, margin {}; expert cache {} of {} "
      "({}); a token reads up to {} of experts when nothing is cached",
      format_bytes(p.usable), n.cgroup_limit > 0 && n.cgroup_limit < n.available ? "cgroup limit" : "MemAvailable",
      format_bytes(n.trunk), format_bytes(n.kv), format_bytes(n.scratch), format_bytes(p.margin), format_bytes(p.budget),
      format_bytes(n.all_experts), p.all_resident ? "all experts fit" : "experts stream from disk",
      format_bytes(n.read_per_token));
  return p;
}

}  // namespace tern
