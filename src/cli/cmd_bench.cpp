// tern bench kernels|memory: measured kernel and memory throughput (never asserted).
#include <fmt/format.h>

#include "cli/commands.h"
#include "tern/bench/kernel_bench.h"
#include "tern/bench/memory_bandwidth.h"
#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/core/kernel_path.h"

namespace tern::cli {

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (kernels, memory bandwidth)");
  bench->require_subcommand(1);

  auto* kernels = bench->add_subcommand("kernels", "Matvec/matmul throughput per weight format, shape and batch");
  auto opt = std::make_shared<KernelBenchOptions>();
  auto formats = std::make_shared<std::vector<std::string>>();
  auto shapes = std::make_shared<std::vector<std::string>>();
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  kernels->add_option("--formats", *formats, "Weight formats (default: q4_k,q4_0,mxfp4,q8_0,q6_k,bf16,f16,f32)")->delimiter(',');
  kernels->add_option("--shapes", *shapes, "Shapes as ROWSxCOLS (default: Qwen3-30B/GPT-OSS-120B experts, lm_head)")->delimiter(',');
  kernels->add_option("--batches", opt->batches, "Token batch sizes")->delimiter(',');
  kernels->add_option("--threads", opt->threads, "Threads (default: all cores)");
  kernels->add_option("--paths", *paths,
                      "Kernel paths to A/B, interleaved in the same rounds (portable, avx2, avx512; default: the active one)")
      ->delimiter(',');
  kernels->add_option("--repeats", opt->repeats, "Interleaved rounds (median reported)")->check(CLI::PositiveNumber);
  kernels->add_flag("--json", *json, "Print JSON");
  kernels->callback([=] {
    opt->formats.clear();
    for (const auto& f : *formats) opt->formats.push_back(parse_tensor_format(f));
    if (opt->formats.empty()) opt->formats = default_bench_formats();
    opt->shapes.clear();
    for (const auto& s : *shapes) {
      auto x = s.find('x');
      if (x == std::string::npos) fail("shape '{}' must be ROWSxCOLS", s);
      opt->shapes.push_back({"", std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1))});
    }
    if (opt->shapes.empty()) opt->shapes = default_bench_shapes();
    opt->paths.clear();
    for (const auto& p : *paths) opt->paths.push_back(parse_kernel_path(p));
    KernelBenchResult r = run_kernel_bench(*opt);
    fmt::print("{}", *json ? r.to_json().dump(2) + "\n" : r.to_markdown());
  });

  auto* memory = bench->add_subcommand("memory", "Memory read bandwidth (1 GiB buffer)");
  auto mthreads = std::make_shared<int>(0);
  memory->add_option("--threads", *mthreads, "Threads (default: all cores)");
  memory->callback([=] {
    int t = *mthreads > 0 ? *mthreads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(t);
    BandwidthResult r = measure_read_bandwidth(pool);
    fmt::print("memory read bandwidth: {:.2f} GB/s ({} threads, {} MiB buffer)\n", r.bytes_per_second / 1e9, r.threads,
               r.buffer_bytes >> 20);
  });
}

}  // namespace tern::cli
