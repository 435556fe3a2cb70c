#pragma once
// TraceRecorder — writes the routing of a run as a trace (docs/TRACES.md):
// one JSON line per token the model runs, in order,
//   {"position":12,"token":791,"experts":[[5,17,...],...],"weights":[[0.31,...],...]}
// with one list per MoE layer (dense layers have none), in layer order, each
// in the router's order (highest weight first). Fed by Session's routing
// sink, it sees exactly the tokens the engine computes: prompt tokens and
// every generated token but the last (which nothing runs).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

#include "tern/models/model.h"
#include "tern/runtime/engine.h"

namespace tern {

class TraceRecorder {
 public:
  // Creates or truncates the file.
  explicit TraceRecorder(const std::filesystem::path& path);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // One line per token of a forward step that ran `tokens` from position
  // `first_position`, with that step's routing.
  void record(std::span<const int32_t> tokens, int64_t first_position, const ForwardTrace& trace);
  // Records every token `session` runs from now on (its routing sink); the
  // recorder must outlive the session's use.
  void attach(Session& session);
  // Flushes and closes; throws tern::Error naming the file if a write failed.
  void close();
  int64_t lines() const { return lines_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::string line_;
  int64_t lines_ = 0;
};

// The trace line of token `t` (0-based within the step) of a step's routing.
std::string format_trace_line(int32_t token, int64_t position, const ForwardTrace& trace, int64_t t,
                              int64_t step_tokens);

}  // namespace tern
