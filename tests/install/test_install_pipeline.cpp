#include "tern/install/install_pipeline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/core/file.h"
#include "tern/core/progress.h"
#include "tern/core/thread_pool.h"

namespace tern {
namespace {

// A source file of `size` bytes whose byte i is a function of i (so a range
// read from the wrong offset shows), written to `path` and not synced: an
// O_DIRECT read must still see what was just written (the kernel writes
// dirty pages back first), as when an install follows a download.
std::string patterned_file(const std::filesystem::path& path, size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + (i >> 12) * 7) & 0xFF);
  File f = File::create(path);
  f.write_all(bytes.data(), bytes.size());
  return bytes;
}

// Jobs copying source ranges to an output file: unaligned offsets and sizes,
// a job of several adjacent ranges (one read), one of ranges out of order
// and apart (several reads, later ones at other alignments), and a range
// ending at the last byte of the file (its aligned read runs past the end).
// Output = each job's input bytes back to back.
void check_copy_jobs(const std::filesystem::path& dir, bool direct_reads) {
  constexpr size_t kSize = 3 * 1024 * 1024 + 123;
  const std::string src = patterned_file(dir / "src.bin", kSize);
  File in = File::open_read(dir / "src.bin");
  File out = File::create(dir / "out.bin");
  const std::vector<std::vector<std::pair<uint64_t, uint64_t>>> ranges = {
      {{0, 4096}},
      {{5, 1000}},
      {{4097, 70000}, {74097, 3}, {74100, 8192}},
      {{2000000, 777}, {100, 50}, {1500001, 65536}},
      {{kSize - 4000, 4000}},
      {{kSize - 1, 1}, {4096 * 3 + 1, 4095}},
  };
  std::vector<InstallJob> jobs;
  std::string expected;
  uint64_t out_at = 0;
  for (const auto& job_ranges : ranges) {
    InstallJob job;
    for (auto [offset, size] : job_ranges) {
      job.inputs.push_back({&in, offset, size});
      job.output_bytes += size;
      expected += src.substr(offset, size);
    }
    job.convert = [n = job.output_bytes](const uint8_t* from, uint8_t* to, ThreadPool&) { std::memcpy(to, from, n); };
    job.output = &out;
    job.output_offset = out_at;
    out_at += job.output_bytes;
    jobs.push_back(std::move(job));
  }
  ThreadPool pool(2);
  Progress progress("test", 0, true);
  run_install_jobs(jobs, pool, progress, direct_reads);
  out.sync();
  const std::string got = read_text_file(dir / "out.bin");
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);

  // A range past the end of the file: the truncated-file error, not garbage.
  std::vector<InstallJob> bad(1);
  bad[0].inputs.push_back({&in, kSize - 10, 20});
  bad[0].output_bytes = 20;
  bad[0].convert = [](const uint8_t*, uint8_t*, ThreadPool&) {};
  bad[0].output = &out;
  testing::expect_error([&] { run_install_jobs(bad, pool, progress, direct_reads); }, {"unexpected end of file", "src.bin"});
}

TEST(InstallPipeline, ReadsEveryRangeWithODirect) {
  testing::TempDir dir;
  // The test is about the O_DIRECT path: say so where the file system refuses it.
  patterned_file(dir / "probe", 4096);
  if (!File::open_direct(dir / "probe").is_open()) GTEST_SKIP() << dir.path() << " does not support O_DIRECT";
  check_copy_jobs(dir.path(), true);
}

TEST(InstallPipeline, ReadsEveryRangeBuffered) {
  testing::TempDir dir;
  check_copy_jobs(dir.path(), false);
}

}  // namespace
}  // namespace tern
