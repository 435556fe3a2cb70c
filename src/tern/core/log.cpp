#include "tern/core/log.h"

#include <cstdlib>
#include <cstring>

namespace tern {

LogLevel log_level() {
  static const LogLevel level = [] {
    const char* env = std::getenv("TERN_LOG");
    if (env && std::strcmp(env, "debug") == 0) return LogLevel::Debug;
    if (env && std::strcmp(env, "warn") == 0) return LogLevel::Warn;
    if (env && std::strcmp(env, "error") == 0) return LogLevel::Error;
    return LogLevel::Info;
  }();
  return level;
}

}  // namespace tern
