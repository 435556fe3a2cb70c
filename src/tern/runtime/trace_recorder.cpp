#include "tern/runtime/trace_recorder.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "tern/core/error.h"

namespace tern {

std::string format_trace_line(int32_t token, int64_t position, const ForwardTrace& trace, int64_t t,
                              int64_t step_tokens) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{{\"position\":{},\"token\":{},\"experts\":[", position,
                 token);
  // Each MoE layer's routing holds step_tokens * top_k entries; dense layers none.
  auto lists = [&](auto&& value_of) {
    bool first_layer = true;
    for (const Routing& r : trace.routing) {
      if (r.experts.empty()) continue;
      const auto k = static_cast<int64_t>(r.experts.size()) / step_tokens;
      out.append(std::string_view(first_layer ? "[" : ",["));
      first_layer = false;
      for (int64_t j = 0; j < k; ++j) {
        if (j) out.push_back(',');
        value_of(r, static_cast<size_t>(t * k + j));
      }
      out.push_back(']');
    }
  };
  lists([&](const Routing& r, size_t i) {
    fmt::format_to(std::back_inserter(out), "{}", r.experts[i]);
  });
  out.append(std::string_view("],\"weights\":["));
  lists([&](const Routing& r, size_t i) {  // JSON has no NaN or infinity
    if (std::isfinite(r.weights[i]))
      fmt::format_to(std::back_inserter(out), "{}", r.weights[i]);
    else
      out.append(std::string_view("null"));
  });
  out.append(std::string_view("]}\n"));
  return fmt::to_string(out);
}

TraceRecorder::TraceRecorder(const std::filesystem::path& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("cannot create trace file {}: {}", path.string(), std::strerror(errno));
}

TraceRecorder::~TraceRecorder() {
  if (file_) std::fclose(file_);
}

void TraceRecorder::record(std::span<const int32_t> tokens, int64_t first_position,
                           const ForwardTrace& trace) {
  if (!file_) fail("trace file {} is closed", path_.string());
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t t = 0; t < n; ++t) {
    line_ = format_trace_line(tokens[static_cast<size_t>(t)], first_position + t, trace, t, n);
    if (std::fwrite(line_.data(), 1, line_.size(), file_) != line_.size())
      fail("writing trace file {}: {}", path_.string(), std::strerror(errno));
    ++lines_;
  }
}

void TraceRecorder::attach(Session& session) {
  session.set_routing_sink([this](std::span<const int32_t> tokens, int64_t first,
                                  const ForwardTrace& trace) { record(tokens, first, trace); });
}

void TraceRecorder::close() {
  if (!file_) return;
  const bool ok = std::fflush(file_) == 0 && !std::ferror(file_);
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed)
    fail("writing trace file {}: {}", path_.string(), std::strerror(ok ? errno : err));
}

}  // namespace tern
