#pragma once
// Pieces every decoder-only architecture shares around its layers: the
// embedding lookup at the bottom and the final norm + lm_head at the top,
// plus the checks on a forward call. The architecture files compose these
// with the attention and MoE blocks.
#include <cstdint>
#include <span>

#include "tern/kernels/weight_view.h"
#include "tern/models/kv_cache.h"

namespace tern {

class ThreadPool;
struct ForwardTrace;

// Fails clearly on an empty call or one that would overflow the context.
void check_forward(int64_t n_tokens, int64_t start, const KVCache& kv);

// x[t] = row tokens[t] of embed (dequantized), each id checked against vocab.
void embed_tokens(const WeightView& embed, std::span<const int32_t> tokens, int64_t vocab, int64_t hidden,
                  float* x);

// logits of the last token ([vocab]) or of every token ([n, vocab]):
// lm_head(rmsnorm(x) * norm). xn is [n, hidden] scratch.
void final_logits(const WeightView& lm_head, const float* norm, float eps, const float* x, int64_t n,
                  int64_t hidden, bool all_positions, float* xn, float* logits, ThreadPool* pool);

// Sizes the trace's per-layer records (when tracing).
void start_trace(ForwardTrace* trace, int64_t layers);
// Records the residual stream x [count floats] after layer `layer` (when tracing hidden states).
void trace_hidden(ForwardTrace* trace, int64_t layer, const float* x, int64_t count);

}  // namespace tern
