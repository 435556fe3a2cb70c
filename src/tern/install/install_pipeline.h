#pragma once
// InstallPipeline — runs the jobs of an install so that the disk and every
// core stay busy at once:
//   reader thread   reads each job's source ranges in job order (one pread
//                   per run of adjacent ranges, large and sequential), with
//                   O_DIRECT where the file system allows it, else buffered
//                   and then dropped from the page cache;
//   calling thread  converts a job's input into its output with the thread
//                   pool (each job splits its rows across the threads),
//                   then runs the job's `finish` (hashing) in job order;
//   writer thread   pwrites each output, starts writeback per 64 MiB
//                   window and drops a window's pages once written, so
//                   dirty pages never pile up.
// At most kDepth jobs are read ahead and kDepth outputs wait for the
// writer, so memory is bounded by a few jobs whatever the model's size.
// An error on any thread stops the pipeline and is rethrown to the caller.
#include <cstdint>
#include <functional>
#include <vector>

namespace tern {

class File;
class Progress;
class ThreadPool;

// Bytes of one source file to read, appended to the job's input buffer.
struct SourceRange {
  const File* file = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct InstallJob {
  std::vector<SourceRange> inputs;  // read back to back into one buffer, in this order
  uint64_t output_bytes = 0;
  // Fills out[0, output_bytes) from in[0, sum of input sizes); may use the pool.
  std::function<void(const uint8_t* in, uint8_t* out, ThreadPool& pool)> convert;
  // Runs on the calling thread in job order after convert (hashing, tables).
  std::function<void(const uint8_t* out)> finish;
  File* output = nullptr;
  uint64_t output_offset = 0;
  uint64_t progress_bytes = 0;  // source bytes this job accounts for
};

// Runs every job; returns when all outputs are written (not yet fsynced).
// direct_reads: O_DIRECT source reads where the file system allows them
// (else, or when false, buffered reads dropped from the page cache behind).
void run_install_jobs(std::vector<InstallJob>& jobs, ThreadPool& pool, Progress& progress, bool direct_reads = true);

}  // namespace tern
