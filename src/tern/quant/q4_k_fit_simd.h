// Q4_K step 1 (q4_k.cpp: q4_k_fit_subblocks + fit_scale_min) with one
// sub-block per SIMD lane, written once for several vector widths. NOT a
// normal header: no include guard; a quantize_*.cpp includes it inside its own
// namespace after defining
//   - V: the vector traits (type T, mask type M, kLanes lanes, the operations
//     used below, each one instruction with the scalar code's IEEE result), and
//   - TERN_Q4K_FIT_TARGET: the function attribute naming that instruction set,
// and gets `q4_k_fit_simd<B>(x, scales, mins, iscales, biases)`, which fits B * kLanes / 8
// consecutive super-blocks at once: sub-block s of super-block q in lane
// 8 * (q % (kLanes / 8)) + s of the (q / (kLanes / 8))-th register. Every lane
// performs exactly the scalar code's operations in its order (V::fma where it
// calls std::fma, nothing fused elsewhere: the including file is compiled
// with contraction off), and
// data-dependent branches become per-lane masks. The B registers give the
// out-of-order core 3 * B independent chains of adds, since the candidates of
// the search depend on each other (each takes the min of the best fit before
// it). Inputs must be finite (callers send other super-blocks to the portable
// code, which defines the result).

// A candidate's sums of w L, w L^2, w x L over the codes L of iscale * (x - cmin).
template <int B>
TERN_Q4K_FIT_TARGET inline void q4_k_take_sums(const typename V::T (&X)[32][B], const typename V::T (&W)[32][B],
                                               const typename V::T* iscale, const typename V::T* cmin,
                                               typename V::T* sum_l, typename V::T* sum_l2, typename V::T* sum_xl) {
  using T = typename V::T;
  T bias[B];
  for (int b = 0; b < B; ++b) {
    sum_l[b] = sum_l2[b] = sum_xl[b] = V::zero();
    bias[b] = V::neg(V::mul(iscale[b], cmin[b]));
  }
  for (int i = 0; i < 32; ++i)
    for (int b = 0; b < B; ++b) {
      const T l = V::code(V::fma(X[i][b], iscale[b], bias[b]));
      const T wl = V::mul(W[i][b], l);
      sum_l[b] = V::add(sum_l[b], wl);
      sum_l2[b] = V::fma(wl, l, sum_l2[b]);
      sum_xl[b] = V::fma(wl, X[i][b], sum_xl[b]);
    }
}

template <int B>
TERN_Q4K_FIT_TARGET void q4_k_fit_simd(const float* x, float* scales, float* mins, float* iscales, float* biases) {
  using T = typename V::T;
  using M = typename V::M;
  constexpr int kSub = 32, kNumSub = 8, kLanes = V::kLanes, kBlocks = B * kLanes / kNumSub;
  // X[i][b], lane l = element i of sub-block l % 8 of super-block (b * kLanes + l) / 8.
  T X[kSub][B], W[kSub][B];
  {
    alignas(64) float xt[kSub][B * kLanes];
    for (int q = 0; q < kBlocks; ++q)
      for (int g = 0; g < kSub / 8; ++g) {
        __m256 rows[8];
        for (int s = 0; s < kNumSub; ++s) rows[s] = _mm256_loadu_ps(x + kQK_K * q + kSub * s + 8 * g);
        transpose8(rows);
        for (int j = 0; j < 8; ++j) _mm256_store_ps(&xt[8 * g + j][kNumSub * q], rows[j]);
      }
    for (int i = 0; i < kSub; ++i)
      for (int b = 0; b < B; ++b) X[i][b] = V::load(&xt[i][kLanes * b]);
  }
  const T zero = V::zero();
  T min[B], sum_w[B], sum_x[B], range[B], scale[B], best_gain[B], best_iscale[B], code_min[B];
  M degenerate[B];
  for (int b = 0; b < B; ++b) {
    T sum_x2 = zero;
    for (int i = 0; i < kSub; ++i) sum_x2 = V::add(sum_x2, V::mul(X[i][b], X[i][b]));
    const T av_x = V::sqrt(V::div(sum_x2, V::set1(32.0f)));
    for (int i = 0; i < kSub; ++i) W[i][b] = V::add(av_x, V::abs(X[i][b]));
    T max = X[0][b];
    min[b] = X[0][b];
    sum_w[b] = W[0][b];
    sum_x[b] = V::mul(W[0][b], X[0][b]);
    for (int i = 1; i < kSub; ++i) {
      min[b] = V::min(X[i][b], min[b]);  // X < min ? X : min
      max = V::max(X[i][b], max);
      sum_w[b] = V::add(sum_w[b], W[i][b]);
      sum_x[b] = V::add(sum_x[b], V::mul(W[i][b], X[i][b]));
    }
    min[b] = V::blend(min[b], zero, V::gt(min[b], zero));
    // A constant sub-block (max == min) keeps L = 0, scale 0, min: its lanes
    // compute garbage below that is never used.
    degenerate[b] = V::eq(max, min[b]);
    range[b] = V::sub(max, min[b]);
  }
  T sum_l[B], sum_l2[B], sum_xl[B];
  // The seed: the min-max fit.
  const T two = V::set1(2.0f);
  for (int b = 0; b < B; ++b) {
    best_iscale[b] = V::div(V::set1(15.0f), range[b]);
    scale[b] = V::div(V::set1(1.0f), best_iscale[b]);
    code_min[b] = min[b];
  }
  q4_k_take_sums<B>(X, W, best_iscale, min, sum_l, sum_l2, sum_xl);
  for (int b = 0; b < B; ++b) {
    const T s = scale[b], m = min[b];
    const T plus = V::add(V::mul(V::mul(two, s), sum_xl[b]), V::mul(V::mul(two, m), sum_x[b]));
    const T minus = V::add(V::add(V::mul(V::mul(s, s), sum_l2[b]), V::mul(V::mul(V::mul(two, s), m), sum_l[b])),
                           V::mul(V::mul(m, m), sum_w[b]));
    best_gain[b] = V::sub(plus, minus);
  }
  // A candidate per lane (its numerator and index c, in float).
  T best_c[B];
  for (int b = 0; b < B; ++b) best_c[b] = V::set1(static_cast<float>(kQ4KSeedCandidate));
  const auto try_candidates = [&](const T* numerator, const T* c_index) TERN_Q4K_FIT_TARGET {
    T iscale[B];
    for (int b = 0; b < B; ++b) iscale[b] = V::div(numerator[b], range[b]);
    q4_k_take_sums<B>(X, W, iscale, min, sum_l, sum_l2, sum_xl);
    for (int b = 0; b < B; ++b) {
      const T D = V::sub(V::mul(sum_w[b], sum_l2[b]), V::mul(sum_l[b], sum_l[b]));
      T this_scale = V::div(V::sub(V::mul(sum_w[b], sum_xl[b]), V::mul(sum_x[b], sum_l[b])), D);
      T this_min = V::div(V::sub(V::mul(sum_l2[b], sum_x[b]), V::mul(sum_l[b], sum_xl[b])), D);
      const M min_positive = V::gt(this_min, zero);
      this_min = V::blend(this_min, zero, min_positive);
      this_scale = V::blend(this_scale, V::div(sum_xl[b], sum_l2[b]), min_positive);
      const T gain = V::add(V::mul(this_scale, sum_xl[b]), V::mul(this_min, sum_x[b]));
      const M better = V::mask_and(V::gt(D, zero), V::gt(gain, best_gain[b]));
      best_gain[b] = V::blend(best_gain[b], gain, better);
      best_iscale[b] = V::blend(best_iscale[b], iscale[b], better);
      code_min[b] = V::blend(code_min[b], min[b], better);
      scale[b] = V::blend(scale[b], this_scale, better);
      min[b] = V::blend(min[b], this_min, better);
      best_c[b] = V::blend(best_c[b], c_index[b], better);
    }
  };
  for (int c = 0; c < kQ4KNumCandidates; c += kQ4KCoarseStep) {
    T numerator[B], c_index[B];
    for (int b = 0; b < B; ++b) {
      numerator[b] = V::set1(kQ4KCandidates[c]);
      c_index[b] = V::set1(static_cast<float>(c));
    }
    try_candidates(numerator, c_index);
  }
  // Around each lane's best even candidate: its numerator (-1 + 0.1 c) + 15,
  // the same float operations as kQ4KCandidates.
  T centre[B];
  for (int b = 0; b < B; ++b) centre[b] = best_c[b];
  for (const int offset : kQ4KRefineOffsets) {
    T numerator[B], c_index[B];
    for (int b = 0; b < B; ++b) {
      c_index[b] = V::min(V::max(V::add(centre[b], V::set1(static_cast<float>(offset))), zero),
                          V::set1(static_cast<float>(kQ4KNumCandidates - 1)));
      numerator[b] = V::add(V::add(V::set1(-1.0f), V::mul(V::set1(0.1f), c_index[b])), V::set1(15.0f));
    }
    try_candidates(numerator, c_index);
  }
  // Outputs in super-block order: the chosen fit's scale, -min and, for its
  // codes (q4_k_fit_codes), iscale and bias; a constant sub-block's are 0.
  for (int b = 0; b < B; ++b) {
    V::store(scales + kLanes * b, V::blend(scale[b], zero, degenerate[b]));
    V::store(mins + kLanes * b, V::neg(min[b]));
    V::store(iscales + kLanes * b, V::blend(best_iscale[b], zero, degenerate[b]));
    V::store(biases + kLanes * b, V::blend(V::neg(V::mul(best_iscale[b], code_min[b])), zero, degenerate[b]));
  }
}
