#pragma once
// Scheduler — the server's one compute thread. Up to `parallel` requests
// decode together: every forward step feeds each active request's next
// token (or its prompt, the step it is admitted) as one batch
// (Session::feed_batch), so an expert read once serves every request routed
// to it. More requests wait in a bounded queue; beyond it submit() refuses
// (the server answers 429). Each slot keeps its session's KV after a request
// ends, and a new request goes to the idle slot whose tokens share the
// longest prefix with its prompt (multi-turn chats do not re-prefill their
// history). A request's tokens are the same, bit for bit, as generate() on a
// fresh session would give for it: batching changes no logit, and sampling
// is per request, seeded.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tern/runtime/engine.h"

namespace tern {

// How a request ended.
enum class FinishCause { Stop, Length, Cancelled, Error };

struct RequestResult {
  FinishCause cause = FinishCause::Stop;
  std::string error;              // FinishCause::Error
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV a kept session already held
  int64_t completion_tokens = 0;
  double queue_seconds = 0;       // waiting for a slot
  double time_to_first_token = 0; // from admission
  double decode_seconds = 0;      // first token to last
  // Expert cache during the request's steps (shared with the requests batched with it).
  uint64_t cache_lookups = 0, cache_hits = 0, bytes_read = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // whole conversation; prompt.size() < context
  int64_t max_tokens = 256;
  SamplerOptions sampling;
  std::vector<int32_t> stop_tokens;
  bool reuse_prefix = true;  // false: prefill the whole prompt even if a kept session holds part of it
  // Where a model with sliding-window rings checkpoints its session (a later
  // turn re-renders the conversation and may step back only to a checkpoint):
  // after this many prompt tokens (tokens_shared_with_next_turn()); -1 after
  // the whole prompt.
  int64_t checkpoint_at = -1;
  // Tests only (`tern serve --force-reply`): these tokens are the reply, as
  // if sampled (each is still fed through the model); it ends after them.
  std::vector<int32_t> forced_reply;
  // Called on the scheduler thread for each sampled token (a stop token
  // included); return false to end the request there (a stop string
  // matched). Keep it short: every request in the batch waits for it.
  std::function<bool(int32_t)> on_token;
  // Called once, on the scheduler thread, when the request ends for any reason.
  std::function<void(const RequestResult&)> on_done;
  // Set by the client's side (it disconnected): the request ends before its next step.
  std::atomic<bool> cancelled{false};
};

struct SchedulerMetrics {
  int64_t active = 0, queued = 0;
  int64_t parallel = 0, max_queue = 0;
  uint64_t requests_done = 0, requests_failed = 0, requests_cancelled = 0, requests_rejected = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  uint64_t steps = 0, batched_rows = 0;  // forward steps run, request-rows in them
  double busy_seconds = 0;               // wall time in forward steps
  // Decode throughput over the last few seconds, all requests together.
  double recent_tokens_per_second = 0;
};

// Observes each forward step's routing (batch rows in slot order) and
// which requests it served: the dashboard's live expert feed.
using StepObserver = std::function<void(const ForwardTrace& routing, int64_t rows)>;

class Scheduler {
 public:
  Scheduler(Engine& engine, int parallel, int max_queue);
  ~Scheduler();  // cancels what is queued or running and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; false when the queue is full (nothing is called back then).
  bool submit(std::shared_ptr<GenerationRequest> request);
  SchedulerMetrics metrics() const;
  // Seconds a new request would wait, roughly (for Retry-After).
  int retry_after_seconds() const;
  void set_step_observer(StepObserver observer);
  int parallel() const { return static_cast<int>(slots_.size()); }

  // The kept sessions (for --kv-dir): each slot's tokens and KV. Only while
  // no request runs (call after stop() or before the first submit).
  std::vector<Session*> sessions();
  // Ends the compute thread after cancelling everything.
  void stop();

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::shared_ptr<GenerationRequest> request;  // null when idle
    std::unique_ptr<Sampler> sampler;
    std::vector<int32_t> pending;  // tokens to feed at the next step
    std::vector<int32_t> after_checkpoint;  // the prompt's rest, fed the step after its checkpoint
    bool checkpoint_prompt = true;          // checkpoint after the whole prompt
    int64_t generated = 0;
    bool prefilling = false;
    RequestResult result;
    std::chrono::steady_clock::time_point admitted, first_token;
    ExpertCacheStats cache0;
    uint64_t last_used = 0;  // for choosing among idle slots
  };
  struct Queued {
    std::shared_ptr<GenerationRequest> request;
    std::chrono::steady_clock::time_point since;
  };

  void run();
  void admit();
  void step();
  void finish(Slot& slot, FinishCause cause, std::string error = {});

  Engine& engine_;
  std::vector<Slot> slots_;
  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  StepObserver observer_;
  SchedulerMetrics m_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (step end, tokens)
  uint64_t clock_ = 0;
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace tern
