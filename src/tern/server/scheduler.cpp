#include "tern/server/scheduler.h"

#include <algorithm>
#include <limits>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/memory.h"
#include "tern/core/units.h"

namespace tern {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

Scheduler::Scheduler(Engine& engine, int parallel, int max_queue)
    : engine_(engine), max_queue_(static_cast<size_t>(std::max(0, max_queue))) {
  if (parallel < 1) fail("--parallel must be at least 1, got {}", parallel);
  // Every slot holds a whole context of KV, allocated now: refuse plainly
  // what cannot fit rather than meet the OOM killer mid-request.
  const uint64_t kv = kv_cache_bytes(engine.config(), engine.context());
  const uint64_t available = available_memory_bytes(), limit = cgroup_memory_limit_bytes();
  const uint64_t usable = limit > 0 && (available == 0 || limit < available) ? limit : available;
  if (usable > 0 && kv * static_cast<uint64_t>(parallel) > usable)
    fail("--parallel {} needs {} of KV cache ({} per request at --ctx {}), more than the {} of memory available "
         "(lower --parallel or --ctx)",
         parallel, format_bytes(kv * static_cast<uint64_t>(parallel)), format_bytes(kv), engine.context(),
         format_bytes(usable));
  slots_.resize(static_cast<size_t>(parallel));
  for (auto& s : slots_) s.session = std::make_unique<Session>(engine);
  m_.parallel = parallel;
  m_.max_queue = static_cast<int64_t>(max_queue_);
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::submit(std::shared_ptr<GenerationRequest> request) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    const size_t busy = static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) {
      return s.request != nullptr;
    }));
    // A free slot takes the request at once; otherwise it waits in the queue.
    if (queue_.size() >= max_queue_ + (slots_.size() - std::min(busy, slots_.size()))) {
      ++m_.requests_rejected;
      return false;
    }
    queue_.push_back({std::move(request), Clock::now()});
  }
  cv_.notify_all();
  return true;
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard lock(mu_);
  SchedulerMetrics m = m_;
  m.active = static_cast<int64_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.request != nullptr; }));
  // Waiting for a slot: those a free slot is about to take are not.
  const int64_t free_slots = static_cast<int64_t>(slots_.size()) - m.active;
  m.queued = std::max<int64_t>(0, static_cast<int64_t>(queue_.size()) - free_slots);
  // Steps of the last 5 s only: an idle server reports 0.
  if (recent_.size() >= 2 && seconds_between(recent_.back().first, Clock::now()) < 5) {
    int64_t tokens = 0;
    for (size_t i = 1; i < recent_.size(); ++i) tokens += recent_[i].second;
    const double span = seconds_between(recent_.front().first, recent_.back().first);
    m.recent_tokens_per_second = span > 0 ? static_cast<double>(tokens) / span : 0;
  }
  return m;
}

int Scheduler::retry_after_seconds() const {
  const SchedulerMetrics m = metrics();
  // The queue drains at about one request per slot per (typical reply /
  // throughput); without a measurement yet, say a few seconds.
  if (m.recent_tokens_per_second <= 0 || m.requests_done == 0) return 5;
  const double tokens_per_request = static_cast<double>(m.generated_tokens) / static_cast<double>(m.requests_done);
  const double seconds = (static_cast<double>(m.queued) + 1) * tokens_per_request / m.recent_tokens_per_second;
  return static_cast<int>(std::clamp(seconds, 1.0, 600.0));
}

void Scheduler::set_step_observer(StepObserver observer) {
  std::lock_guard lock(mu_);
  observer_ = std::move(observer);
}

std::vector<Session*> Scheduler::sessions() {
  std::vector<Session*> out;
  for (auto& s : slots_) out.push_back(s.session.get());
  return out;
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !queue_.empty() ||
               std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.request != nullptr; });
      });
      if (stopping_) break;
    }
    admit();
    step();
  }
  // Stopping: everything still queued or running ends as cancelled.
  std::deque<Queued> left;
  {
    std::lock_guard lock(mu_);
    left.swap(queue_);
  }
  for (auto& s : slots_)
    if (s.request) finish(s, FinishCause::Cancelled);
  for (auto& q : left) {
    RequestResult r;
    r.cause = FinishCause::Cancelled;
    r.prompt_tokens = static_cast<int64_t>(q.request->prompt.size());
    if (q.request->on_done) q.request->on_done(r);
  }
}

void Scheduler::admit() {
  for (;;) {
    Queued q;
    Slot* slot = nullptr;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      // The idle slot sharing the longest prefix with the prompt; among
      // equals, the least recently used.
      size_t best_common = 0;
      for (auto& s : slots_) {
        if (s.request) continue;
        const size_t c = common_prefix(s.session->tokens(), queue_.front().request->prompt);
        if (!slot || c > best_common || (c == best_common && s.last_used < slot->last_used)) {
          slot = &s;
          best_common = c;
        }
      }
      if (!slot) return;
      q = std::move(queue_.front());
      queue_.pop_front();
      slot->request = q.request;  // under the lock: metrics() counts it active
    }
    Slot& s = *slot;
    GenerationRequest& r = *q.request;
    s.result = {};
    s.result.prompt_tokens = static_cast<int64_t>(r.prompt.size());
    s.admitted = Clock::now();
    s.result.queue_seconds = seconds_between(q.since, s.admitted);
    s.generated = 0;
    s.last_used = ++clock_;
    if (r.cancelled) {
      finish(s, FinishCause::Cancelled);
      continue;
    }
    try {
      if (r.prompt.empty()) fail("the prompt is empty");
      if (static_cast<int64_t>(r.prompt.size()) >= engine_.context())
        fail("the prompt has {} tokens; the context holds {} (prompt + at least one generated token)",
             r.prompt.size(), engine_.context());
      s.sampler = std::make_unique<Sampler>(r.sampling);
    } catch (const Error& e) {
      finish(s, FinishCause::Error, e.what());
      continue;
    }
    if (!r.reuse_prefix) s.session->reset();
    const int64_t kept = s.session->keep_common_prefix(r.prompt);
    s.result.cached_tokens = kept;
    s.pending.assign(r.prompt.begin() + kept, r.prompt.end());
    s.checkpoint_prompt = true;
    if (r.checkpoint_at >= 0 && r.checkpoint_at < static_cast<int64_t>(r.prompt.size()) &&
        s.session->kv().has_rings()) {
      s.checkpoint_prompt = false;
      if (r.checkpoint_at > kept) {  // two steps: up to the checkpoint, then the rest
        s.pending.assign(r.prompt.begin() + kept, r.prompt.begin() + r.checkpoint_at);
        s.after_checkpoint.assign(r.prompt.begin() + r.checkpoint_at, r.prompt.end());
      }
    }
    s.prefilling = true;
    s.cache0 = engine_.cache().stats();
  }
}

void Scheduler::finish(Slot& s, FinishCause cause, std::string error) {
  s.result.cause = cause;
  s.result.error = std::move(error);
  s.result.completion_tokens = s.generated;
  if (s.generated > 1) s.result.decode_seconds = seconds_between(s.first_token, Clock::now());
  const ExpertCacheStats c = engine_.cache().stats();
  s.result.cache_lookups = c.lookups - s.cache0.lookups;
  s.result.cache_hits = c.hits - s.cache0.hits;
  s.result.bytes_read = c.bytes_read - s.cache0.bytes_read;
  std::shared_ptr<GenerationRequest> r;
  {
    std::lock_guard lock(mu_);
    r = std::move(s.request);
    s.request.reset();
    switch (cause) {
      case FinishCause::Stop:
      case FinishCause::Length: ++m_.requests_done; break;
      case FinishCause::Cancelled: ++m_.requests_cancelled; break;
      case FinishCause::Error: ++m_.requests_failed; break;
    }
    m_.prompt_tokens += static_cast<uint64_t>(s.result.prompt_tokens);
    m_.cached_tokens += static_cast<uint64_t>(s.result.cached_tokens);
    m_.generated_tokens += static_cast<uint64_t>(s.generated);
  }
  s.pending.clear();
  s.after_checkpoint.clear();
  s.sampler.reset();
  s.prefilling = false;
  if (r && r->on_done) r->on_done(s.result);
}

void Scheduler::step() {
  std::vector<Slot*> members;
  for (auto& s : slots_) {
    if (!s.request) continue;
    if (s.request->cancelled) {
      finish(s, FinishCause::Cancelled);
      continue;
    }
    members.push_back(&s);
  }
  if (members.empty()) return;
  std::vector<Session*> sessions;
  std::vector<std::span<const int32_t>> tokens;
  for (Slot* s : members) {
    sessions.push_back(s->session.get());
    tokens.emplace_back(s->pending);
  }
  StepObserver observer;
  {
    std::lock_guard lock(mu_);
    observer = observer_;
  }
  int64_t rows = 0;
  for (const auto& t : tokens) rows += static_cast<int64_t>(t.size());
  const auto t0 = Clock::now();
  try {
    Session::feed_batch(sessions, tokens,
                        observer ? std::function<void(const ForwardTrace&)>(
                                       [&](const ForwardTrace& trace) { observer(trace, rows); })
                                 : std::function<void(const ForwardTrace&)>());
  } catch (const Error& e) {
    // A failed step (a disk read error, a corrupt expert) fails the requests
    // in it; their sessions may hold half-written KV, so they start afresh.
    log(LogLevel::Error, "forward step failed: {}", e.what());
    for (Slot* s : members) {
      s->session->reset();
      finish(*s, FinishCause::Error, e.what());
    }
    return;
  }
  const auto t1 = Clock::now();
  int64_t decoded = 0;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (Slot* s : members) {
    GenerationRequest& r = *s->request;
    if (s->prefilling) {
      if (!s->after_checkpoint.empty()) {  // where the next turn will part from this prompt
        s->session->checkpoint();
        s->pending = std::move(s->after_checkpoint);
        s->after_checkpoint.clear();
        continue;
      }
      if (s->checkpoint_prompt) s->session->checkpoint();  // as generate(): a later turn may re-render from here
      s->prefilling = false;
    }
    logits_ = s->session->logits();
    for (int32_t id : engine_.unusable_tokens()) logits_[static_cast<size_t>(id)] = neg_inf;
    int32_t next;
    try {
      next = s->sampler->sample(logits_, s->session->tokens());
    } catch (const Error& e) {
      finish(*s, FinishCause::Error, e.what());
      continue;
    }
    if (!r.forced_reply.empty()) {
      if (s->generated >= static_cast<int64_t>(r.forced_reply.size())) {
        finish(*s, FinishCause::Stop);
        continue;
      }
      next = r.forced_reply[static_cast<size_t>(s->generated)];
    }
    ++s->generated;
    ++decoded;
    if (s->generated == 1) {
      s->first_token = t1;
      s->result.time_to_first_token = seconds_between(s->admitted, t1);
    }
    const bool stop_token = std::find(r.stop_tokens.begin(), r.stop_tokens.end(), next) != r.stop_tokens.end();
    const bool more = r.on_token ? r.on_token(next) : true;
    if (stop_token || !more) {
      finish(*s, r.cancelled ? FinishCause::Cancelled : FinishCause::Stop);
      continue;
    }
    if (s->generated >= r.max_tokens || s->session->position() + 1 > engine_.context()) {
      finish(*s, FinishCause::Length);  // as generate(): the last token is not fed
      continue;
    }
    s->pending.assign(1, next);
  }
  std::lock_guard lock(mu_);
  ++m_.steps;
  m_.batched_rows += static_cast<uint64_t>(rows);
  m_.busy_seconds += seconds_between(t0, t1);
  recent_.push_back({t1, decoded});
  while (recent_.size() > 2 && seconds_between(recent_.front().first, t1) > 5) recent_.pop_front();
}

}  // namespace tern
