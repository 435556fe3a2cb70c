#include "tern/core/kernel_path.h"

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

bool cpu_has_avx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc/compiler-rt report avx512* only when the OS saves ZMM and mask
  // registers (XGETBV).
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

std::string_view path_requirements(KernelPath path) {
  switch (path) {
    case KernelPath::Portable: return "nothing";
    case KernelPath::Avx2: return "AVX2/FMA/F16C";
    case KernelPath::Avx512: return "AVX-512 F/BW/VL/VNNI (or AVX2/FMA/F16C)";
  }
  return "?";
}

KernelPath initial_path() {
  const char* env = std::getenv("TERN_KERNELS");
  if (env == nullptr || *env == '\0' || std::string_view(env) == "auto") return best_kernel_path();
  const std::string_view want = env;
  for (KernelPath path : {KernelPath::Portable, KernelPath::Avx2, KernelPath::Avx512}) {
    if (want != kernel_path_name(path)) continue;
    if (!kernel_path_supported(path)) fail("TERN_KERNELS={} but this CPU lacks {}", want, path_requirements(path));
    return path;
  }
  fail("TERN_KERNELS='{}' is not one of: auto, portable, avx2, avx512", want);
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
    case KernelPath::Avx512: {
      static const bool has = cpu_has_avx512();
      return has;
    }
  }
  return false;
}

KernelPath best_kernel_path() {
  if (kernel_path_supported(KernelPath::Avx512)) return KernelPath::Avx512;
  return kernel_path_supported(KernelPath::Avx2) ? KernelPath::Avx2 : KernelPath::Portable;
}

KernelPath active_kernel_path() { return path_slot().load(std::memory_order_relaxed); }

void set_kernel_path(KernelPath path) {
  if (!kernel_path_supported(path))
    fail("kernel path '{}' is not supported on this CPU", kernel_path_name(path));
  path_slot().store(path, std::memory_order_relaxed);
}

KernelPath parse_kernel_path(std::string_view name) {
  for (KernelPath path : {KernelPath::Portable, KernelPath::Avx2, KernelPath::Avx512})
    if (name == kernel_path_name(path)) return path;
  fail("kernel path '{}' is not one of: portable, avx2, avx512", name);
}

std::string_view kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::Portable: return "portable";
    case KernelPath::Avx2: return "avx2";
    case KernelPath::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace tern
