#pragma once
// The kernel benchmark behind `tern bench kernels`: every weight format x
// real model shapes x token batch sizes, timed as interleaved repeats (each
// round runs every configuration once, so machine noise hits all alike) over
// weight sets larger than the caches. Reports weight GB/s, GFLOP/s and the
// ratio to the memory bandwidth measured in the same run: each round also
// times a raw streaming read of the same weight set, so the ratio compares
// kernel and memory under the same (noisy, shared-machine) conditions.
// Several kernel paths (A/B) run interleaved in the same rounds too, so their
// speed ratio is measured under the same conditions. Never asserted.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/core/tensor_format.h"
#include "tern/core/kernel_path.h"

namespace tern {

struct BenchShape {
  std::string name;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs
};

struct KernelBenchOptions {
  std::vector<TensorFormat> formats;
  std::vector<BenchShape> shapes;
  std::vector<int64_t> batches = {1, 8, 32, 128};
  std::vector<KernelPath> paths;  // empty: the active path only
  int threads = 0;  // 0 = all cores
  int repeats = 5;
  uint64_t working_set_bytes = 512ull << 20;  // weights cycled per timing at batch 1
  bool quiet = false;
};

std::vector<BenchShape> default_bench_shapes();
std::vector<TensorFormat> default_bench_formats();

struct KernelBenchRow {
  TensorFormat format;
  BenchShape shape;
  int64_t batch = 0;
  KernelPath path = KernelPath::Portable;
  std::string skipped;  // reason, if the combination was not run
  double seconds_per_matrix = 0;  // median
  double weight_gbps = 0;
  double gflops = 0;
  double memory_gbps = 0;       // raw streaming read of the same weights, interleaved with the kernel runs
  double bandwidth_ratio = 0;   // weight GB/s / memory_gbps
  double speedup_vs_batch1 = 0;  // tokens/s at this batch / tokens/s at batch 1, same path
  double speedup_vs_first_path = 0;  // time of the first path given / time of this one, same batch
};

struct KernelBenchResult {
  double memory_gbps = 0;
  int threads = 0;
  std::vector<KernelPath> paths;
  std::vector<KernelBenchRow> rows;
  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

KernelBenchResult run_kernel_bench(const KernelBenchOptions& options);

}  // namespace tern
