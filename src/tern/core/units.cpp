#include "tern/core/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "tern/core/error.h"

namespace tern {

uint64_t parse_size(std::string_view text) {
  std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  double value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(value) || value < 0)
    fail("invalid size '{}': expected e.g. 512M, 4G, 1.5GiB", text);
  std::string suffix(end);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'B': mult = 1; break;
      case 'K': mult = 1024.0; break;
      case 'M': mult = 1024.0 * 1024; break;
      case 'G': mult = 1024.0 * 1024 * 1024; break;
      case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
      default: fail("invalid size '{}': unknown unit '{}' (use K, M, G or T)", text, suffix);
    }
    std::string rest = suffix.substr(1);
    if (suffix[0] == 'B' ? !rest.empty() : !(rest.empty() || rest == "B" || rest == "I" || rest == "IB"))
      fail("invalid size '{}': unknown unit '{}' (use K, M, G or T)", text, suffix);
  }
  double bytes = value * mult;
  if (bytes > 1.8e19) fail("invalid size '{}': too large", text);
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, units[u]);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace tern
