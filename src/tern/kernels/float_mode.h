// Internal to kernels/: fixes how the compiler may treat float code in the
// including file, whatever flags the library is built with. Include it first
// in a kernel .cpp, before any other header: the options must cover inline
// functions from headers too, because GCC does not inline a function into one
// compiled with other options (measured: convert_row and fast_exp stayed
// calls when this came last).
// - no contraction of a * b + c into one fused rounding, so the portable path
//   (the reference) computes the same numbers on every target; fused
//   multiply-add appears only where a kernel asks for it (AVX2 intrinsics);
// - no trapping math: nothing here reads floating-point exception flags, and
//   GCC otherwise refuses to vectorize loops with float compares/selects
//   (fast_exp). It changes no computed value.
// No include guard on purpose: the pragmas must reach each including file.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#endif
