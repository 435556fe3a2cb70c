#include "tern/bench/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "tern/bench/memory_bandwidth.h"
#include "tern/core/aligned_buffer.h"
#include "tern/core/error.h"
#include "tern/core/thread_pool.h"
#include "tern/kernels/matvec.h"
#include "tern/quant/quantize.h"

namespace tern {

std::vector<BenchShape> default_bench_shapes() {
  return {{"qwen3-30b expert gate/up", 768, 2048},
          {"qwen3-30b expert down", 2048, 768},
          {"gpt-oss-120b expert gate_up", 5760, 2880},
          {"gpt-oss-120b expert down", 2880, 2880},
          {"qwen3 lm_head", 151936, 2048}};
}

std::vector<TensorFormat> default_bench_formats() {
  return {TensorFormat::Q4_K, TensorFormat::Q4_0, TensorFormat::MXFP4, TensorFormat::Q8_0, TensorFormat::Q6_K,
          TensorFormat::BF16, TensorFormat::F16, TensorFormat::F32};
}

namespace {

struct Config {
  KernelBenchRow row;
  int64_t copies = 1;  // matrices of the group's weight set run per timing
  double memory_gbps = 0;  // raw read speed of the same weight set, same rounds
  uint64_t matrix_bytes = 0;
  std::vector<float> x, y;
  std::vector<double> times;  // seconds per matrix, one per round
};

}  // namespace

KernelBenchResult run_kernel_bench(const KernelBenchOptions& opt) {
  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  KernelBenchResult result;
  result.threads = threads;
  const std::vector<KernelPath> paths = opt.paths.empty() ? std::vector<KernelPath>{active_kernel_path()} : opt.paths;
  for (KernelPath p : paths)
    if (!kernel_path_supported(p)) fail("bench kernels: kernel path '{}' is not supported on this CPU", kernel_path_name(p));
  result.paths = paths;
  const ScopedKernelPath restore(active_kernel_path());
  result.memory_gbps = measure_read_bandwidth(pool).bytes_per_second / 1e9;

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Config> configs;
  // One (format, shape) group at a time, so only its weights are in memory;
  // inside a group the batch sizes and kernel paths are interleaved round by
  // round, so the batch-N / batch-1 and path-to-path ratios are measured
  // under the same conditions.
  for (TensorFormat f : opt.formats) {
    for (const BenchShape& s : opt.shapes) {
      const size_t first = configs.size();
      std::string skip;
      if (s.cols % format_info(f).block_elements != 0)
        skip = fmt::format("{} columns do not fit {} blocks of {}", s.cols, format_name(f), format_info(f).block_elements);
      for (int64_t b : opt.batches)
        for (KernelPath p : paths) {
          Config c;
          c.row.format = f;
          c.row.shape = s;
          c.row.batch = b;
          c.row.path = p;
          c.row.skipped = skip;
          configs.push_back(std::move(c));
        }
      if (!skip.empty()) continue;
      // The weight set: one quantized matrix copied until it exceeds the caches.
      const uint64_t bytes = format_bytes(f, {s.rows, s.cols});
      const int64_t copies = static_cast<int64_t>(std::max<uint64_t>(1, (opt.working_set_bytes + bytes - 1) / bytes));
      AlignedBuffer weights(bytes * static_cast<uint64_t>(copies), 64);
      {
        std::vector<float> row(static_cast<size_t>(s.cols));
        const int64_t rb = row_bytes(f, s.cols);
        for (int64_t r = 0; r < s.rows; ++r) {
          for (auto& v : row) v = normal(rng) * 0.05f;
          quantize_row(f, row.data(), weights.data() + r * rb, s.cols);
        }
        for (int64_t k = 1; k < copies; ++k) std::memcpy(weights.data() + k * bytes, weights.data(), bytes);
      }
      for (size_t i = first; i < configs.size(); ++i) {
        Config& c = configs[i];
        // Larger batches are compute-bound: fewer copies keep the run short.
        c.copies = std::max<int64_t>(1, copies / c.row.batch);
        c.matrix_bytes = bytes;
        c.x.resize(static_cast<size_t>(c.row.batch * s.cols));
        for (auto& v : c.x) v = normal(rng);
        c.y.resize(static_cast<size_t>(c.row.batch * s.rows));
      }
      std::vector<double> group_bw;  // raw reads of this weight set, one per round
      for (int r = 0; r < opt.repeats + 1; ++r) {
        double bw = time_buffer_read(pool, weights.data(), bytes * static_cast<uint64_t>(copies));
        if (r > 0) group_bw.push_back(bw);
        for (size_t i = first; i < configs.size(); ++i) {
          Config& c = configs[i];
          if (!c.row.skipped.empty()) continue;
          set_kernel_path(c.row.path);
          auto t0 = std::chrono::steady_clock::now();
          try {
            for (int64_t k = 0; k < c.copies; ++k) {
              // Cycle from a different copy each round so no copy stays cached.
              const int64_t idx = (k + static_cast<int64_t>(r) * c.copies) % copies;
              WeightView w{weights.data() + idx * static_cast<int64_t>(bytes), f, s.rows, s.cols};
              if (c.row.batch == 1) matvec(w, c.x.data(), c.y.data(), &pool);
              else matmul(w, c.x.data(), c.row.batch, c.y.data(), &pool);
            }
          } catch (const Error& e) {
            c.row.skipped = e.what();
            continue;
          }
          double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) c.times.push_back(secs / static_cast<double>(c.copies));  // round 0 warms up
        }
      }
      std::sort(group_bw.begin(), group_bw.end());
      const double group_gbps = group_bw.empty() ? 0 : group_bw[group_bw.size() / 2] / 1e9;
      for (size_t i = first; i < configs.size(); ++i) configs[i].memory_gbps = group_gbps;
      if (!opt.quiet) fmt::print(stderr, "bench kernels: {} {}x{} done\n", format_name(f), s.rows, s.cols);
    }
  }
  // (path, format, rows, cols) -> batch-1 time; (format, rows, cols, batch) -> first path's time.
  std::map<std::tuple<int, int, int64_t, int64_t>, double> batch1, first_path;
  for (Config& c : configs) {
    if (!c.row.skipped.empty() || c.times.empty()) continue;
    std::sort(c.times.begin(), c.times.end());
    double t = c.times[c.times.size() / 2];
    c.row.seconds_per_matrix = t;
    c.row.weight_gbps = static_cast<double>(c.matrix_bytes) / t / 1e9;
    c.row.gflops = 2.0 * static_cast<double>(c.row.shape.rows * c.row.shape.cols * c.row.batch) / t / 1e9;
    c.row.memory_gbps = c.memory_gbps;
    c.row.bandwidth_ratio = c.memory_gbps > 0 ? c.row.weight_gbps / c.memory_gbps : 0;
    if (c.row.batch == 1)
      batch1[{static_cast<int>(c.row.path), static_cast<int>(c.row.format), c.row.shape.rows, c.row.shape.cols}] = t;
    if (c.row.path == paths.front())
      first_path[{static_cast<int>(c.row.format), static_cast<int>(c.row.batch), c.row.shape.rows, c.row.shape.cols}] = t;
  }
  for (Config& c : configs) {
    auto it = batch1.find({static_cast<int>(c.row.path), static_cast<int>(c.row.format), c.row.shape.rows, c.row.shape.cols});
    if (c.row.skipped.empty() && it != batch1.end() && c.row.seconds_per_matrix > 0)
      c.row.speedup_vs_batch1 = static_cast<double>(c.row.batch) * it->second / c.row.seconds_per_matrix;
    auto fp = first_path.find({static_cast<int>(c.row.format), static_cast<int>(c.row.batch), c.row.shape.rows, c.row.shape.cols});
    if (c.row.skipped.empty() && fp != first_path.end() && c.row.seconds_per_matrix > 0)
      c.row.speedup_vs_first_path = fp->second / c.row.seconds_per_matrix;
    result.rows.push_back(c.row);
  }
  return result;
}

nlohmann::json KernelBenchResult::to_json() const {
  nlohmann::json rows_j = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"format", format_name(r.format)}, {"shape", r.shape.name}, {"rows", r.shape.rows},
                        {"cols", r.shape.cols}, {"batch", r.batch}, {"path", kernel_path_name(r.path)}};
    if (!r.skipped.empty()) {
      j["skipped"] = r.skipped;
    } else {
      j["ms_per_matrix"] = r.seconds_per_matrix * 1e3;
      j["weight_gbps"] = r.weight_gbps;
      j["gflops"] = r.gflops;
      j["memory_gbps"] = r.memory_gbps;
      j["bandwidth_ratio"] = r.bandwidth_ratio;
      j["tokens_per_second_vs_batch1"] = r.speedup_vs_batch1;
      if (paths.size() > 1) j["speed_vs_first_path"] = r.speedup_vs_first_path;
    }
    rows_j.push_back(j);
  }
  nlohmann::json paths_j = nlohmann::json::array();
  for (KernelPath p : paths) paths_j.push_back(kernel_path_name(p));
  return {{"memory_gbps", memory_gbps}, {"threads", threads}, {"paths", paths_j}, {"rows", rows_j}};
}

std::string KernelBenchResult::to_markdown() const {
  std::string out = fmt::format(
      "memory read bandwidth at start ({} threads, 1 GiB): {:.2f} GB/s; each row's ratio is to a raw read of the "
      "same weights timed in the same rounds (mem GB/s column)\n\n",
      threads, memory_gbps);
  // A/B runs add the path and its speed relative to the first path given.
  const bool ab = paths.size() > 1;
  out += fmt::format("| format | shape (rows x cols) | batch |{} ms/matrix | weight GB/s | mem GB/s | % of mem bw | GFLOP/s | "
                     "tok/s vs batch 1 |{}\n",
                     ab ? " path |" : "", ab ? fmt::format(" speed vs {} |", kernel_path_name(paths.front())) : "");
  out += fmt::format("| --- | --- | --- |{} --- | --- | --- | --- | --- | --- |{}\n", ab ? " --- |" : "", ab ? " --- |" : "");
  for (const auto& r : rows) {
    std::string shape = r.shape.name.empty() ? fmt::format("{}x{}", r.shape.rows, r.shape.cols)
                                             : fmt::format("{} {}x{}", r.shape.name, r.shape.rows, r.shape.cols);
    const std::string path = ab ? fmt::format(" {} |", kernel_path_name(r.path)) : "";
    if (!r.skipped.empty()) {
      out += fmt::format("| {} | {} | {} |{} skipped: {} | | | | | |{}\n", format_name(r.format), shape, r.batch, path,
                         r.skipped, ab ? " |" : "");
      continue;
    }
    out += fmt::format("| {} | {} | {} |{} {:.3f} | {:.2f} | {:.2f} | {:.0f}% | {:.1f} | {:.1f}x |{}\n",
                       format_name(r.format), shape, r.batch, path, r.seconds_per_matrix * 1e3, r.weight_gbps,
                       r.memory_gbps, 100 * r.bandwidth_ratio, r.gflops, r.speedup_vs_batch1,
                       ab ? fmt::format(" {:.2f}x |", r.speedup_vs_first_path) : "");
  }
  return out;
}

}  // namespace tern
