#pragma once
// Pieces every decoder-only architecture shares around its layers: the
// embedding lookup at the bottom and the final norm + lm_head at the top,
// plus the checks on a forward call. The architecture files compose these
// with the attention and MoE blocks.
#include <cstdint>
#include <span>
#include <vector>

#include "tern/kernels/weight_view.h"
#include "tern/models/attention_block.h"
#include "tern/models/kv_cache.h"
#include "tern/models/model.h"

namespace tern {

class ThreadPool;
struct ForwardTrace;

// A batch of sequences laid out as rows: every token's id and slot (KV,
// position), and the rows whose logits are wanted, sequence by sequence.
struct BatchRows {
  std::vector<int32_t> tokens;
  std::vector<TokenSlot> slots;
  std::vector<int64_t> logit_rows;
};

// Checks every sequence (no tokens, context overflow: clear errors) and lays
// the batch out.
void layout_batch(std::span<const SequenceBatch> sequences, BatchRows& rows);

// x[t] = row tokens[t] of embed (dequantized), each id checked against vocab.
void embed_tokens(const WeightView& embed, std::span<const int32_t> tokens, int64_t vocab, int64_t hidden,
                  float* x);

// Each sequence's logits: lm_head(rmsnorm(x) * norm) of the rows it wants,
// written where it asked. xn and y are scratch of rows.logit_rows.size()
// rows of hidden and vocab floats.
// softcap > 0: each logit becomes softcap x tanh(logit / softcap).
void final_logits(const WeightView& lm_head, const float* norm, float eps, const float* x, int64_t hidden,
                  std::span<const SequenceBatch> sequences, const BatchRows& rows, float* xn, float* y,
                  ThreadPool* pool, float softcap = 0);

// Sizes the trace's per-layer records (when tracing).
void start_trace(ForwardTrace* trace, int64_t layers);
// Records the residual stream x [count floats] after layer `layer` (when tracing hidden states).
void trace_hidden(ForwardTrace* trace, int64_t layer, const float* x, int64_t count);

}  // namespace tern
