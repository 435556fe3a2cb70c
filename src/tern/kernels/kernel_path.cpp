#include "tern/kernels/kernel_path.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "tern/core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tern {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // avx2 also implies the OS saves YMM registers (libgcc/compiler-rt check
  // XGETBV). F16C is read from CPUID leaf 1, ECX bit 29: some compilers'
  // __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

KernelPath initial_path() {
  KernelPath path = best_kernel_path();
  if (const char* env = std::getenv("TERN_KERNELS"); env != nullptr && *env != '\0') {
    std::string_view want = env;
    if (want == "portable") {
      path = KernelPath::Portable;
    } else if (want == "avx2") {
      if (!kernel_path_supported(KernelPath::Avx2))
        fail("TERN_KERNELS=avx2 but this CPU lacks AVX2/FMA/F16C");
      path = KernelPath::Avx2;
    } else if (want != "auto") {
      fail("TERN_KERNELS='{}' is not one of: auto, portable, avx2", want);
    }
  }
  return path;
}

std::atomic<KernelPath>& path_slot() {
  static std::atomic<KernelPath> slot{initial_path()};
  return slot;
}

}  // namespace

bool kernel_path_supported(KernelPath path) {
  switch (path) {
    case KernelPath::Portable: return true;
    case KernelPath::Avx2: {
      static const bool has = cpu_has_avx2();
      return has;
    }
  }
  return false;
}

KernelPath best_kernel_path() {
  return kernel_path_supported(KernelPath::Avx2) ? KernelPath::Avx2 : KernelPath::Portable;
}

KernelPath active_kernel_path() { return path_slot().load(std::memory_order_relaxed); }

void set_kernel_path(KernelPath path) {
  if (!kernel_path_supported(path))
    fail("kernel path '{}' is not supported on this CPU", kernel_path_name(path));
  path_slot().store(path, std::memory_order_relaxed);
}

std::string_view kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::Portable: return "portable";
    case KernelPath::Avx2: return "avx2";
  }
  return "?";
}

}  // namespace tern
