#pragma once
// plan_memory — what `--ram auto` decides: a pure function of the machine's
// memory (MemAvailable, and the cgroup's limit when one is set: it counts
// page cache too) and the model's needs, so it is tested without a machine.
//   expert budget = min(all experts, available - trunk - KV - scratch - margin)
// margin = 5% of available + 64 MiB (allocator slack, page tables, the
// process's own code and libraries). It refuses, with the numbers, when the
// budget would fall below the minimum (one token's experts of the widest
// layer).
#include <cstdint>
#include <string>

namespace tern {

struct MemoryNeeds {
  uint64_t available = 0;      // MemAvailable
  uint64_t cgroup_limit = 0;   // 0: none
  uint64_t trunk = 0;          // resident weights
  uint64_t kv = 0;             // KV cache for --ctx
  uint64_t scratch = 0;        // activations, logits, expert outputs
  uint64_t all_experts = 0;    // every expert record
  uint64_t min_budget = 0;     // one token's experts of the widest layer
  uint64_t read_per_token = 0;  // expert bytes a token reads when nothing is cached
};

struct MemoryPlan {
  uint64_t usable = 0;  // min(available, cgroup limit)
  uint64_t margin = 0;
  uint64_t budget = 0;  // the expert cache budget
  bool all_resident = false;
  std::string text;  // the plan, for the user
};

// Throws tern::Error naming the numbers when even the minimum does not fit.
MemoryPlan plan_memory(const MemoryNeeds& needs);

}  // namespace tern
