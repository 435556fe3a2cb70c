#pragma once
// Test helpers: synthesize small random-weight models into a TempDir.
#include <string>

#include "support/temp_dir.h"
#include "tern/install/installer.h"
#include "tern/synth/synth.h"

namespace tern::testing {

inline SynthOptions tiny_synth(const std::filesystem::path& out, DType dtype = DType::BF16, uint64_t seed = 7) {
  SynthOptions o;
  o.preset = "tiny";
  o.output = out;
  o.dtype = dtype;
  o.seed = seed;
  o.quiet = true;
  return o;
}

inline InstallOptions quiet_install(const std::filesystem::path& src, const std::filesystem::path& out) {
  InstallOptions o;
  o.source = src;
  o.output = out;
  o.quiet = true;
  return o;
}

}  // namespace tern::testing
