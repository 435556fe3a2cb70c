#pragma once
// ExpertIO — reads of expert records that run while the caller computes.
// submit() queues one read (one expert record = one request) and returns at
// once; a backend thread performs it and reports it through the handler
// given at construction, on that thread. Interchangeable backends:
//   uring  io_uring (Debian's liburing): up to queue_depth reads in flight,
//          submitted and reaped by one I/O thread, short reads resubmitted;
//   pread  queue_depth threads, each a blocking pread at a time (the
//          fallback where io_uring is unavailable or refused);
//   mmap   memcpy from a shared mapping of the file: page faults do the
//          reading. Kept only as the baseline to measure the others against
//          (it is what llama.cpp does); the page cache keeps what it reads.
// Requests carry the file descriptor to read (O_DIRECT or buffered: the
// ExpertStore decides) and an opaque tag returned with the completion.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tern {

enum class IoBackend { Uring, Pread, Mmap };

std::string_view io_backend_name(IoBackend backend);
// "uring", "pread" or "mmap"; throws tern::Error naming the choices otherwise.
IoBackend parse_io_backend(std::string_view name);

struct IoRequest {
  int fd = -1;
  const uint8_t* mapped = nullptr;  // mmap backend: the file's mapping
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dst = nullptr;
  uint64_t tag = 0;
  // Demand reads (a layer waits for them) go ahead of every queued
  // non-urgent read (prefetches); reads already on the device are not touched.
  bool urgent = true;
};

// error: 0 on success, else an errno value (EIO, EINVAL, ...; ENODATA for a
// read that ended early: the file is shorter than the manifest says).
using IoHandler = std::function<void(uint64_t tag, int error)>;

class ExpertIO {
 public:
  virtual ~ExpertIO() = default;
  // Thread-safe; never waits for the read itself.
  virtual void submit(const IoRequest& request) = 0;
  // Makes a queued non-urgent read into `dst` urgent (it moves behind the
  // urgent ones already queued): a prefetch or preload that is now demanded.
  // A read already on the device, or none into dst, is left as it is.
  virtual void promote(const uint8_t* dst) = 0;
  virtual IoBackend backend() const = 0;
};

// Throws tern::Error if the backend cannot start (e.g. io_uring refused by
// the kernel or a seccomp policy); the ExpertStore then falls back to pread.
std::unique_ptr<ExpertIO> make_expert_io(IoBackend backend, int queue_depth, IoHandler handler);

}  // namespace tern
