// The libFuzzer entry of one target: TERN_FUZZ_ENTRY names its entry
// function (fuzz/CMakeLists.txt builds one fuzz_<name> per target), so each
// executable links only the code its target reaches.
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::fuzz::TERN_FUZZ_ENTRY(std::span<const uint8_t>(data, size));
  return 0;
}
