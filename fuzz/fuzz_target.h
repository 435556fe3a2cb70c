#pragma once
// Fuzz targets: one entry function per parser of untrusted input, shared by
// the libFuzzer executables (fuzz_<name>, built by the `fuzz` preset with
// clang) and by tern_fuzz_replay, which the normal build registers with ctest
// to re-run every committed seed and regression input (so `make test` and
// `make asan` re-check them). See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"

namespace tern::fuzz {

// Runs one input. A tern::Error is the expected answer to a hostile input
// and is dropped; anything else (another exception type, a broken
// invariant) is a bug: it prints the reason and aborts, which libFuzzer
// records as a crash and ctest as a failure.
using FuzzEntry = void (*)(std::span<const uint8_t> input);

struct FuzzTarget {
  std::string_view name;  // also the folder under fuzz/corpus, fuzz/dict, fuzz/regressions
  FuzzEntry run;
};

// All targets (fuzz_targets.cpp, linked into tern_fuzz_replay only).
const std::vector<FuzzTarget>& fuzz_targets();
const FuzzTarget* find_fuzz_target(std::string_view name);

// The entry functions (one file each).
void fuzz_safetensors(std::span<const uint8_t> input);
void fuzz_config(std::span<const uint8_t> input);
void fuzz_container(std::span<const uint8_t> input);
void fuzz_tokenizer(std::span<const uint8_t> input);
void fuzz_trace(std::span<const uint8_t> input);
void fuzz_usage(std::span<const uint8_t> input);

// Helpers for the entry functions.
// A scratch directory of this process (tmpfs when there is one), removed at exit.
const std::filesystem::path& scratch_dir();
// Writes bytes to path, replacing it (plain POSIX I/O: fast, no checks).
void write_file(const std::filesystem::path& path, std::string_view bytes);
// Prints "fuzz invariant broken: <what>" and aborts.
[[noreturn]] void broken(const std::string& what);
// Runs fn; swallows a tern::Error with a one-line message; aborts on a
// multi-line message or any other exception.
template <typename Fn>
void run_expecting_clean_errors(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    // The clean one-line refusal a hostile input should get.
    const std::string_view message = e.what();
    if (message.find_first_of("\n\r") != std::string_view::npos)
      broken(std::string("error message is not one line: ") + e.what());
  } catch (const std::exception& e) {
    broken(std::string("an exception other than tern::Error escaped (the CLI would print "
                       "'internal error'): ") + e.what());
  }
}

}  // namespace tern::fuzz
