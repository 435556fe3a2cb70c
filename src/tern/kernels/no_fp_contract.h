// Internal to kernels/: include last in a kernel .cpp. Forbids the compiler
// from fusing a * b + c into one rounding in plain C++ code, whatever -march
// the library is built with, so the portable path (the reference) computes
// the same numbers on every target. Fused multiply-add is used only where a
// kernel asks for it explicitly (AVX2 intrinsics).
// No include guard on purpose: the pragma must reach each including file.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
