#pragma once
// Minimal leveled logging to stderr. TERN_LOG=debug enables debug lines.
#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace tern {

enum class LogLevel { Debug, Info, Warn, Error };
LogLevel log_level();

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::string msg = fmt::format(format, std::forward<Args>(args)...);
  std::fprintf(stderr, "tern: %s: %s\n", names[static_cast<int>(level)], msg.c_str());
}

}  // namespace tern
