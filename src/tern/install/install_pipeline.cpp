#include "tern/install/install_pipeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "tern/core/aligned_buffer.h"
#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/progress.h"
#include "tern/core/thread_pool.h"

namespace tern {

namespace {

// Jobs read ahead of the converter, and outputs queued for the writer. Eight
// rather than three: the reader and the writer share one disk, and deeper
// queues ride out each other's stalls; Q4_K installs were faster in each of
// 4 interleaved rounds (80-217% vs 71-120% of the raw read) for ~140 MiB more
// peak RSS (docs/RESULTS.md, 2026-12-06).
constexpr size_t kDepth = 8;
// Writeback window: outputs are written back and dropped from the page
// cache one window behind the writer.
constexpr uint64_t kWindowBytes = 64ull << 20;
// The reader asks the kernel to start reading this far ahead of the job it
// reads (posix_fadvise WILLNEED: large asynchronous reads), so the disk
// streams while the reader copies and the converter works.
constexpr uint64_t kReadAheadBytes = 64ull << 20;
// O_DIRECT offsets, sizes and buffers are multiples of this.
constexpr uint64_t kDirectAlignment = 4096;

// A queue of at most `capacity` items shared by one producer and one
// consumer; `fail` wakes both so an error anywhere stops the pipeline.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}
  // False if the pipeline stopped.
  bool push(T item) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopped_ || items_.size() < capacity_; });
    if (stopped_) return false;
    items_.push_back(std::move(item));
    cv_.notify_all();
    return true;
  }
  // False if the pipeline stopped or the producer closed and nothing is left.
  bool pop(T& item) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopped_ || closed_ || !items_.empty(); });
    if (stopped_ || items_.empty()) return false;
    item = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return true;
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    cv_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_ = false, stopped_ = false;
};

// Buffers are recycled: at most ~3 kDepth + 3 are in use at once, and reusing
// them keeps RSS flat (freed large blocks would otherwise stay in the
// allocator's per-thread arenas).
class BufferPool {
 public:
  AlignedBuffer take(uint64_t size) {
    {
      std::lock_guard lock(mutex_);
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].size() >= size) {
          AlignedBuffer b = std::move(free_[i]);
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return b;
        }
      if (!free_.empty()) free_.pop_back();  // too small: replaced by a larger one
    }
    return AlignedBuffer(std::max<uint64_t>(size, 1), kDirectAlignment);
  }
  void give(AlignedBuffer b) {
    if (b.size() == 0) return;
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(b));
  }

 private:
  std::mutex mutex_;
  std::vector<AlignedBuffer> free_;
};

// A job's input: its bytes start at data + start (where the first read's
// O_DIRECT alignment put them).
struct Input {
  AlignedBuffer data;
  uint64_t start = 0;
};

struct Output {
  File* file = nullptr;
  uint64_t offset = 0;
  AlignedBuffer data;
  uint64_t size = 0;
};

// Per output file: ranges written in the current and the previous window.
struct Writeback {
  std::vector<std::pair<uint64_t, uint64_t>> current, previous;
  uint64_t current_bytes = 0;
};

class Pipeline {
 public:
  Pipeline(std::vector<InstallJob>& jobs, ThreadPool& pool, Progress& progress, bool direct_reads)
      : jobs_(jobs), pool_(pool), progress_(progress), direct_reads_(direct_reads), inputs_(kDepth), outputs_(kDepth) {}

  void run() {
    std::thread reader([this] { guarded([this] { read_all(); }); });
    std::thread writer([this] { guarded([this] { write_all(); }); });
    guarded([this] { convert_all(); });
    reader.join();
    writer.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  template <typename Fn>
  void guarded(Fn&& fn) {
    try {
      fn();
    } catch (...) {
      {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      inputs_.stop();
      outputs_.stop();
    }
  }

  // The O_DIRECT handle for a source file, opened on first use; null where
  // the file system refuses O_DIRECT (those files are read buffered).
  const File* direct_for(const File* source) {
    auto [it, added] = direct_.try_emplace(source);
    if (added && direct_reads_) it->second = File::open_direct(source->path());
    return it->second.is_open() ? &it->second : nullptr;
  }

  // Reads [offset, offset + size) of `source` with O_DIRECT into dst, which
  // is 4 KiB aligned and holds the enclosing 4 KiB-aligned range; the bytes
  // land at dst + (offset % 4 KiB). False (nothing usable read) if the file
  // system refused the aligned read, so the caller falls back to buffered.
  bool read_direct(const File* source, uint8_t* dst, uint64_t offset, uint64_t size) {
    const File* direct = direct_for(source);
    if (!direct) return false;
    const uint64_t head = offset % kDirectAlignment;
    const uint64_t want = round_up(head + size, kDirectAlignment);
    int error = 0;
    const size_t got = direct->pread_upto(dst, want, offset - head, &error);
    if (error == EINVAL) {
      direct_[source].close();  // this file's reads go buffered from now on
      return false;
    }
    if (error != 0) fail("read error in {} at offset {}: {}", source->path(), offset - head + got, std::strerror(error));
    if (got < head + size)
      fail("unexpected end of file in {}: wanted {} bytes at offset {}, file has {} bytes (truncated?)", source->path(),
           size, offset, source->size());
    return true;
  }

  void read_buffered(const File* source, uint8_t* dst, uint64_t offset, uint64_t size) {
    source->pread_exact(dst, size, offset);
    source->drop_cache(offset, size);
  }

  // Each job's runs of adjacent ranges are read with one request each:
  // O_DIRECT where the file system allows it (no page-cache copy, no cache
  // to drop; the first run lands in place, later ones go through a scratch
  // buffer because their alignment differs), else buffered with the kernel
  // asked to read ahead (WILLNEED) and the pages dropped once read.
  void read_all() {
    size_t hinted = 0;  // jobs [0, hinted) have been announced to the kernel
    uint64_t hinted_bytes = 0, read_bytes = 0;
    AlignedBuffer scratch;
    for (const InstallJob& job : jobs_) {
      while (hinted < jobs_.size() && hinted_bytes < read_bytes + kReadAheadBytes) {
        for (const SourceRange& r : jobs_[hinted].inputs) {
          if (!direct_for(r.file)) r.file->will_need(r.offset, r.size);
          hinted_bytes += r.size;
        }
        ++hinted;
      }
      uint64_t total = 0;
      for (const SourceRange& r : job.inputs) total += r.size;
      const uint64_t head = job.inputs.empty() ? 0 : job.inputs.front().offset % kDirectAlignment;
      Input in{buffers_.take(round_up(head + total, kDirectAlignment)), head};
      uint64_t at = 0;
      for (size_t i = 0; i < job.inputs.size();) {
        // One request for a run of ranges adjacent in the same file.
        const SourceRange& first = job.inputs[i];
        uint64_t size = first.size;
        size_t j = i + 1;
        while (j < job.inputs.size() && job.inputs[j].file == first.file &&
               job.inputs[j].offset == first.offset + size)
          size += job.inputs[j++].size;
        uint8_t* dst = in.data.data() + head + at;
        if (i == 0) {
          if (!read_direct(first.file, in.data.data(), first.offset, size))
            read_buffered(first.file, dst, first.offset, size);
        } else {
          const uint64_t run_head = first.offset % kDirectAlignment;
          const uint64_t need = round_up(run_head + size, kDirectAlignment);
          if (scratch.size() < need) scratch = AlignedBuffer(need);
          if (read_direct(first.file, scratch.data(), first.offset, size))
            std::memcpy(dst, scratch.data() + run_head, size);
          else
            read_buffered(first.file, dst, first.offset, size);
        }
        at += size;
        read_bytes += size;
        i = j;
      }
      if (!inputs_.push(std::move(in))) return;
    }
    inputs_.close();
  }

  void convert_all() {
    for (InstallJob& job : jobs_) {
      Input in;
      if (!inputs_.pop(in)) return;  // stopped by an error elsewhere
      Output out{job.output, job.output_offset, buffers_.take(job.output_bytes), job.output_bytes};
      job.convert(in.data.data() + in.start, out.data.data(), pool_);
      buffers_.give(std::move(in.data));
      if (job.finish) job.finish(out.data.data());
      if (!outputs_.push(std::move(out))) return;
      progress_.add(job.progress_bytes);
    }
    outputs_.close();
  }

  void write_all() {
    std::map<File*, Writeback> files;
    Output out;
    while (outputs_.pop(out)) {
      if (out.size == 0) continue;
      out.file->pwrite_all(out.data.data(), out.size, out.offset);
      out.file->start_writeback(out.offset, out.size);
      buffers_.give(std::move(out.data));
      Writeback& wb = files[out.file];
      wb.current.push_back({out.offset, out.size});
      wb.current_bytes += out.size;
      if (wb.current_bytes >= kWindowBytes) {
        for (auto [off, len] : wb.previous) out.file->flush_and_drop(off, len);
        wb.previous = std::move(wb.current);
        wb.current.clear();
        wb.current_bytes = 0;
      }
    }
    for (auto& [file, wb] : files) {
      for (auto [off, len] : wb.previous) file->flush_and_drop(off, len);
      for (auto [off, len] : wb.current) file->flush_and_drop(off, len);
    }
  }

  std::vector<InstallJob>& jobs_;
  ThreadPool& pool_;
  Progress& progress_;
  const bool direct_reads_;
  BufferPool buffers_;
  std::map<const File*, File> direct_;  // used by the reader thread only
  BoundedQueue<Input> inputs_;
  BoundedQueue<Output> outputs_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace

void run_install_jobs(std::vector<InstallJob>& jobs, ThreadPool& pool, Progress& progress, bool direct_reads) {
  Pipeline(jobs, pool, progress, direct_reads).run();
}

}  // namespace tern
