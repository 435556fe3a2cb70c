#pragma once
// Element-wise and reduction kernels on float32 vectors. All are single-
// threaded (they touch a few thousand floats; a thread hand-off would cost
// more) and deterministic: reductions use a fixed order.
#include <cstdint>

namespace tern {

// out = x / sqrt(mean(x^2) + eps) * w. The sum of squares is accumulated in
// double (8 interleaved partial sums, folded in a fixed order): the spread of
// activations in a residual stream makes float sums lose digits. The scale is
// then rounded to float and applied in float: out[i] = (x[i] * s) * w[i], as
// the Hugging Face float32 path does. w may be null (no weight). out may
// alias x. Same numbers on every kernel path.
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out);

// In place, numerically stable: subtracts the max before exp (in float, as
// PyTorch does; exp within 1 ulp, not libm's), sums the exponentials in
// double and scales by 1/sum in double. A NaN or +inf input, or all -inf,
// gives NaN everywhere, like PyTorch. Same numbers on every kernel path.
void softmax(float* x, int64_t n);

// silu(x) = x / (1 + exp(-x)), exp within 1 ulp and capped at exp(88) (so
// silu(x) for x < -88 is a tiny negative number, not -0); out may alias x.
void silu(const float* x, float* out, int64_t n);
// out = silu(gate) * up (the SwiGLU feed-forward); out may alias either input.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// gpt_oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = (u + 1) * (g * sigmoid(alpha * g)). out may alias gate or up.
void swiglu_clamped(const float* gate, const float* up, float* out, int64_t n, float limit, float alpha);

// gelu with the tanh approximation (PyTorch's gelu(approximate="tanh"),
// transformers' gelu_pytorch_tanh): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715
// g^3))), then times up (GeGLU). std::tanh on every kernel path; out may
// alias either input.
void geglu_tanh(const float* gate, const float* up, float* out, int64_t n);
// x = cap * tanh(x / cap) in place (Gemma's logit softcapping).
void softcap(float* x, float cap, int64_t n);

// out = a + b; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);
// x *= s in place.
void scale(float* x, float s, int64_t n);
// y += a * x (fused on the AVX2 path).
void axpy(float a, const float* x, float* y, int64_t n);
// Dot product in the 16-lane order of the active path; dot(W row, x) equals
// the matching element of matvec with F32 weights bit for bit.
float dot(const float* a, const float* b, int64_t n);

}  // namespace tern
