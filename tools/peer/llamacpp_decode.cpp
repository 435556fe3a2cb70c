// llamacpp_decode — the peer's side of tools/bench_peer.py: llama.cpp's
// prefill of a prompt of token ids and greedy decode of N tokens, timed as
// Tern's `generate --json` times them (decode tok/s = (N - 1) / the time after
// the first token), printed as one JSON line. Not part of Tern's build: it
// links against a llama.cpp built outside the repository (docs/RESULTS.md
// has the commands); it uses only llama.h's public API.
//   llamacpp_decode MODEL.gguf PROMPT_IDS N [--no-repack] [--lazy on|off|auto] [--threads T]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "llama.h"
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  if (argc < 4) return 2;
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  int threads = 2;
  for (int i = 4; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-repack")) mp.use_extra_bufts = false;
    else if (!std::strcmp(argv[i], "--lazy") && i + 1 < argc) {
      const char* m = argv[++i];
      mp.lazy_mode = !std::strcmp(m, "on") ? LLAMA_LAZY_MODE_ON : !std::strcmp(m, "off") ? LLAMA_LAZY_MODE_OFF : LLAMA_LAZY_MODE_AUTO;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
  }
  const double t_load0 = now();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  std::vector<llama_token> toks;
  std::string s = argv[2];
  for (size_t p = 0; p < s.size();) { size_t q = s.find(',', p); if (q == std::string::npos) q = s.size(); toks.push_back(std::atoi(s.substr(p, q - p).c_str())); p = q + 1; }
  const int n = std::atoi(argv[3]);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096; cp.n_batch = 512; cp.n_threads = threads; cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  const double t0 = now();
  if (llama_decode(ctx, llama_batch_get_one(toks.data(), (int)toks.size()))) return 1;
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  auto argmax = [&] { const float* l = llama_get_logits_ith(ctx, -1); int b = 0; for (int i = 1; i < vocab; ++i) if (l[i] > l[b]) b = i; return b; };
  llama_token next = argmax();
  const double t1 = now();
  for (int i = 1; i < n; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&next, 1))) return 1;
    next = argmax();
  }
  const double t2 = now();
  std::printf("{\"load_seconds\": %.3f, \"prefill_seconds\": %.3f, \"prefill_tokens_per_second\": %.3f, \"decode_seconds\": %.3f, \"decode_tokens_per_second\": %.4f}\n",
              t0 - t_load0, t1 - t0, toks.size() / (t1 - t0), t2 - t1, (n - 1) / (t2 - t1));
  return 0;
}
