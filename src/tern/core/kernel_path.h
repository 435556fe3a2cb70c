#pragma once
// KernelPath — which implementation of the numeric kernels runs: the portable
// C++ path (the reference, builds everywhere) or a SIMD path chosen at run
// time from the CPU's features. The library is compiled for generic x86-64;
// SIMD code is compiled per function with target attributes, so one binary
// runs on any x86-64 and uses AVX2 or AVX-512 where present.
//
// Within one path every kernel has a fixed summation order, so results never
// depend on thread count or on how work is split. The paths differ from each
// other by rounding only (AVX2 uses fused multiply-add; portable never fuses).
// Block-quantized weights give the same bits on every path (quant_kernels.h);
// AVX-512 runs the AVX2 dense kernels, so it matches AVX2 bit for bit.
#include <string_view>

namespace tern {

enum class KernelPath {
  Portable,  // plain C++, no fused multiply-add: the reference
  Avx2,      // x86-64 AVX2 + FMA + F16C
  Avx512,    // AVX2's requirements + AVX-512 F/BW/VL + VNNI (quantized kernels; dense ones are AVX2's)
};

// The path kernels use now. Defaults to best_kernel_path(), unless the
// environment variable TERN_KERNELS=portable|avx2|avx512 (debugging, A/B timing)
// names another when the process starts.
KernelPath active_kernel_path();

// Forces a path for the whole process (tests, A/B timing). Not meant to be
// changed while kernels run on other threads. Throws tern::Error if this CPU
// or build lacks the path.
void set_kernel_path(KernelPath path);

// The fastest path this build and CPU support.
KernelPath best_kernel_path();
bool kernel_path_supported(KernelPath path);

std::string_view kernel_path_name(KernelPath path);
// The path named `name` ("portable", "avx2", "avx512"); throws tern::Error otherwise.
KernelPath parse_kernel_path(std::string_view name);

// Restores the previous path on scope exit (tests).
class ScopedKernelPath {
 public:
  explicit ScopedKernelPath(KernelPath path) : previous_(active_kernel_path()) {
    set_kernel_path(path);
  }
  ~ScopedKernelPath() { set_kernel_path(previous_); }
  ScopedKernelPath(const ScopedKernelPath&) = delete;
  ScopedKernelPath& operator=(const ScopedKernelPath&) = delete;

 private:
  KernelPath previous_;
};

}  // namespace tern
