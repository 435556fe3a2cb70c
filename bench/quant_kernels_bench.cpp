// Microbenchmarks of the quantized-weight kernels with data in cache, so they
// time compute, not DRAM (`tern bench kernels` measures that):
//   QuantDot/<format>/<path>/tokens:N   the row kernel: 64 rows x 2048 cols
//                                        (fits L2) against N tokens; avx512
//                                        tokens:1 is the 8-row ymm VNNI
//                                        batch-1 kernel, tokens >= 2 the
//                                        16-row zmm one (Q6_K: AVX2's)
//   QuantizeActivation/<act>/<path>     one 2048-element activation row
//   QuantMatvec/<format>/<path>          matvec 768 x 2048, one thread
//   QuantizeWeights/<format>/<path>      quantize_row (what install runs), 64 Ki floats
// Counters: weight bytes/s, and MAC/s (rows x cols x tokens per second).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "tern/core/aligned_buffer.h"
#include "tern/core/kernel_path.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/quant_kernels.h"
#include "tern/quant/quantize.h"
#include "tern/quant/vec_dot.h"

namespace tern {
namespace {

constexpr TensorFormat kFormats[] = {TensorFormat::Q4_K, TensorFormat::Q4_0, TensorFormat::MXFP4,
                                     TensorFormat::Q8_0, TensorFormat::Q6_K};

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

AlignedBuffer quantized_matrix(TensorFormat f, int64_t rows, int64_t cols) {
  const int64_t rb = row_bytes(f, cols);
  AlignedBuffer w(static_cast<size_t>(rb * rows), 64);
  std::vector<float> x = random_floats(rows * cols, 1);
  for (int64_t r = 0; r < rows; ++r) quantize_row(f, x.data() + r * cols, w.data() + r * rb, cols);
  return w;
}

const detail::QuantKernels* kernels_for(KernelPath path) {
  switch (path) {
    case KernelPath::Avx512: return detail::avx512_quant_kernels();
    case KernelPath::Avx2: return detail::avx2_quant_kernels();
    case KernelPath::Portable: break;
  }
  return &detail::portable_quant_kernels();
}

void quant_dot(benchmark::State& state, TensorFormat f, KernelPath path) {
  const detail::QuantKernels* k = kernels_for(path);
  if (k == nullptr || !kernel_path_supported(path)) {
    state.SkipWithError("kernel path not supported on this CPU");
    return;
  }
  const int64_t rows = 64, cols = 2048, n = state.range(0);
  AlignedBuffer w = quantized_matrix(f, rows, cols);
  AlignedBuffer act(static_cast<size_t>(detail::quant_acts_bytes(f, cols, n)), 64);
  const detail::QuantActs acts = detail::quant_acts_layout(f, cols, n, act.data());
  std::vector<float> x = random_floats(n * cols, 2), y(static_cast<size_t>(rows * n));
  for (int64_t t = 0; t < n; ++t) k->quantize(f, x.data() + t * cols, cols, acts, t);
  const detail::RowsRef ref{w.data(), f, row_bytes(f, cols), cols};
  for (auto _ : state) {
    k->gemm_rows(ref, 0, rows, acts, n, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_B/s"] =
      benchmark::Counter(iters * static_cast<double>(w.size()), benchmark::Counter::kIsRate);
  state.counters["MAC/s"] =
      benchmark::Counter(iters * static_cast<double>(rows * cols * n), benchmark::Counter::kIsRate);
}

void quantize_activation_bench(benchmark::State& state, TensorFormat f, KernelPath path) {
  const detail::QuantKernels* k = kernels_for(path);
  if (k == nullptr || !kernel_path_supported(path)) {
    state.SkipWithError("kernel path not supported on this CPU");
    return;
  }
  const int64_t cols = 2048;
  AlignedBuffer act(static_cast<size_t>(detail::quant_acts_bytes(f, cols, 1)), 64);
  const detail::QuantActs acts = detail::quant_acts_layout(f, cols, 1, act.data());
  std::vector<float> x = random_floats(cols, 3);
  for (auto _ : state) {
    k->quantize(f, x.data(), cols, acts, 0);
    benchmark::DoNotOptimize(act.data());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * cols), benchmark::Counter::kIsRate);
}

void quant_matvec(benchmark::State& state, TensorFormat f, KernelPath path) {
  if (!kernel_path_supported(path)) {
    state.SkipWithError("kernel path not supported on this CPU");
    return;
  }
  const ScopedKernelPath scoped(path);
  const int64_t rows = 768, cols = 2048;
  AlignedBuffer w = quantized_matrix(f, rows, cols);
  std::vector<float> x = random_floats(cols, 4), y(static_cast<size_t>(rows));
  const WeightView view{w.data(), f, rows, cols};
  for (auto _ : state) {
    matvec(view, x.data(), y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_B/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(w.size()), benchmark::Counter::kIsRate);
}

// quantize_row on 64 Ki Gaussian floats (in L2): the install's quantizer.
void quantize_weights_bench(benchmark::State& state, TensorFormat f, KernelPath path) {
  if (!kernel_path_supported(path)) {
    state.SkipWithError("kernel path not supported on this CPU");
    return;
  }
  const ScopedKernelPath scoped(path);
  const int64_t n = 1 << 16;
  std::vector<float> x = random_floats(n, 5);
  AlignedBuffer out(static_cast<size_t>(row_bytes(f, n)), 64);
  for (auto _ : state) {
    quantize_row(f, x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["ns/element"] = benchmark::Counter(static_cast<double>(state.iterations() * n),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void register_all() {
  for (TensorFormat f : {TensorFormat::Q4_K, TensorFormat::Q8_0})
    for (KernelPath path : {KernelPath::Avx512, KernelPath::Avx2, KernelPath::Portable})
      benchmark::RegisterBenchmark(("QuantizeWeights/" + std::string(format_name(f)) + "/" +
                                    std::string(kernel_path_name(path))).c_str(),
                                   quantize_weights_bench, f, path);
  for (TensorFormat f : kFormats) {
    for (KernelPath path : {KernelPath::Avx512, KernelPath::Avx2, KernelPath::Portable}) {
      std::string name = "QuantDot/" + std::string(format_name(f)) + "/" + std::string(kernel_path_name(path));
      auto* b = benchmark::RegisterBenchmark(name.c_str(), quant_dot, f, path)->ArgName("tokens")->Arg(1);
      if (path != KernelPath::Portable) b->Arg(8)->Arg(32);
    }
  }
  for (TensorFormat f : {TensorFormat::Q8_0, TensorFormat::Q4_K})
    for (KernelPath path : {KernelPath::Avx2, KernelPath::Portable}) {
      const char* act = activation_format(f) == ActivationFormat::Q8_0 ? "q8_0" : "q8_k";
      std::string name = "QuantizeActivation/" + std::string(act) + "/" + std::string(kernel_path_name(path));
      benchmark::RegisterBenchmark(name.c_str(), quantize_activation_bench, f, path);
    }
  for (TensorFormat f : kFormats)
    for (KernelPath path : {KernelPath::Avx512, KernelPath::Avx2})
      benchmark::RegisterBenchmark(
          ("QuantMatvec/" + std::string(format_name(f)) + "/" + std::string(kernel_path_name(path))).c_str(),
          quant_matvec, f, path);
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
