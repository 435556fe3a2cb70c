#include "tern/models/decoder.h"

#include "tern/core/error.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/models/model.h"

namespace tern {

void check_forward(int64_t n_tokens, int64_t start, const KVCache& kv) {
  if (n_tokens == 0) fail("forward called with no tokens");
  if (start < 0 || start + n_tokens > kv.max_positions())
    fail("context overflow: {} positions needed, the context holds {}", start + n_tokens, kv.max_positions());
}

void embed_tokens(const WeightView& embed, std::span<const int32_t> tokens, int64_t vocab, int64_t hidden,
                  float* x) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
    dequantize_row(embed, id, x + static_cast<int64_t>(t) * hidden);
  }
}

void final_logits(const WeightView& lm_head, const float* norm, float eps, const float* x, int64_t n,
                  int64_t hidden, bool all_positions, float* xn, float* logits, ThreadPool* pool) {
  const int64_t first = all_positions ? 0 : n - 1;
  for (int64_t t = first; t < n; ++t) rmsnorm(x + t * hidden, norm, hidden, eps, xn + (t - first) * hidden);
  matmul(lm_head, xn, n - first, logits, pool);
}

void start_trace(ForwardTrace* trace, int64_t layers) {
  if (!trace) return;
  trace->hidden.assign(static_cast<size_t>(layers), {});
  trace->routing.assign(static_cast<size_t>(layers), {});
}

void trace_hidden(ForwardTrace* trace, int64_t layer, const float* x, int64_t count) {
  if (trace && trace->hidden_states) trace->hidden[static_cast<size_t>(layer)].assign(x, x + count);
}

}  // namespace tern
