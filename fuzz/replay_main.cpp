// tern_fuzz_replay TARGET PATH... — runs every file under each PATH (files or
// directories, recursively; a missing PATH is skipped) through the fuzz
// target's entry function once, without libFuzzer. ctest runs it over
// fuzz/corpus/TARGET and fuzz/regressions/TARGET in every build, so the
// sanitizer build re-checks each seed and each input that once crashed.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_target.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tern_fuzz_replay TARGET [FILE|DIR]...\ntargets:");
    for (const auto& t : tern::fuzz::fuzz_targets()) std::fprintf(stderr, " %.*s", int(t.name.size()), t.name.data());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const tern::fuzz::FuzzTarget* target = tern::fuzz::find_fuzz_target(argv[1]);
  if (!target) {
    std::fprintf(stderr, "tern_fuzz_replay: unknown target '%s'\n", argv[1]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::printf("%s\n", f.c_str());
    std::fflush(stdout);
    std::ifstream in(f, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    target->run(bytes);
  }
  std::printf("%zu inputs replayed through '%s', none crashed\n", files.size(), argv[1]);
  return 0;
}
