#include "tern/models/decoder.h"

#include "tern/core/error.h"
#include "tern/kernels/matvec.h"
#include "tern/kernels/ops.h"
#include "tern/models/model.h"

namespace tern {

void layout_batch(std::span<const SequenceBatch> sequences, BatchRows& rows) {
  rows.tokens.clear();
  rows.slots.clear();
  rows.logit_rows.clear();
  if (sequences.empty()) fail("forward called with no sequences");
  for (const SequenceBatch& s : sequences) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) fail("forward called with no tokens");
    if (!s.kv || s.start < 0 || s.start + n > s.kv->max_positions())
      fail("context overflow: {} positions needed, the context holds {}", s.start + n, s.kv ? s.kv->max_positions() : 0);
    const auto first_row = static_cast<int64_t>(rows.tokens.size());
    for (int64_t t = 0; t < n; ++t) {
      rows.tokens.push_back(s.tokens[static_cast<size_t>(t)]);
      rows.slots.push_back({s.kv, s.start + t});
    }
    for (int64_t t = s.all_positions ? 0 : n - 1; t < n; ++t) rows.logit_rows.push_back(first_row + t);
  }
}

void embed_tokens(const WeightView& embed, std::span<const int32_t> tokens, int64_t vocab, int64_t hidden,
                  float* x) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
    dequantize_row(embed, id, x + static_cast<int64_t>(t) * hidden);
  }
}

void final_logits(const WeightView& lm_head, const float* norm, float eps, const float* x, int64_t hidden,
                  std::span<const SequenceBatch> sequences, const BatchRows& rows, float* xn, float* y,
                  ThreadPool* pool, float softcap) {
  const auto m = static_cast<int64_t>(rows.logit_rows.size());
  for (int64_t i = 0; i < m; ++i) rmsnorm(x + rows.logit_rows[static_cast<size_t>(i)] * hidden, norm, hidden, eps, xn + i * hidden);
  const int64_t vocab = lm_head.rows;
  // One sequence: straight into its output; several: into y, then copied out.
  float* dst = sequences.size() == 1 ? sequences[0].logits : y;
  matmul(lm_head, xn, m, dst, pool);
  if (softcap > 0) tern::softcap(dst, softcap, m * vocab);
  if (sequences.size() == 1) return;
  int64_t i = 0;
  for (const SequenceBatch& s : sequences) {
    const int64_t k = s.all_positions ? static_cast<int64_t>(s.tokens.size()) : 1;
    std::copy(y + i * vocab, y + (i + k) * vocab, s.logits);
    i += k;
  }
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
