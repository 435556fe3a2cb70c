#pragma once
// ExpertStore — where expert bytes live and how they are read: one request
// per expert record from experts.bin (or one of its replicas, --mirror),
// through an ExpertIO backend (io_uring by default, a pread pool where
// io_uring is refused, mmap as a baseline), with O_DIRECT when the file
// system allows it (else buffered reads followed by POSIX_FADV_DONTNEED), so
// the page cache does not quietly hold the model and memory figures stay
// honest.
//
// Every record read from disk is checked against its xxh3 (unless
// verify = false). A replica whose read fails or whose bytes do not match is
// reported (a warning naming it) and the read is retried on the next
// replica; only when every replica failed does the read fail, with an error
// naming (layer, expert), the file and the offset. The bytes are the same
// whichever replica served them, so replicas never change results.
//
// Replica choice: each record goes to one replica, chosen deterministically
// from (layer, expert) by weighted rendezvous hashing, weights = each
// replica's O_DIRECT read bandwidth measured when the store opens.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tern/core/file.h"
#include "tern/experts/expert_io.h"
#include "tern/format/tern_model.h"

namespace tern {

struct ExpertStoreOptions {
  bool direct_io = true;  // O_DIRECT when supported
  bool verify = true;     // check each record's xxh3 after every read from disk
  IoBackend backend = IoBackend::Uring;
  int queue_depth = 8;    // reads in flight (uring) or reading threads (pread, mmap)
  std::vector<std::filesystem::path> mirrors;  // replicas of experts.bin
  // Test hook (also TERN_IO_FAULTS): comma-separated
  // "kind:layer:expert[:replica[:times]]" with kind eio (the read fails),
  // short (it ends early), corrupt (a byte flips after the read) or slow (it
  // completes 20 ms late, a busy disk); layer and
  // expert may be *, replica * or absent means every replica, times (default
  // unlimited) how many reads fail before the fault clears.
  std::string faults;
};

struct ReplicaInfo {
  std::string path;
  double measured_bytes_per_second = 0;  // 0 when only one replica (not measured)
  uint64_t reads = 0, bytes = 0, failures = 0;
};

// Called on an I/O thread when a read finished: error is null once the record
// is in memory and verified, else the reason (every replica failed).
using ReadDone = void (*)(void* context, const std::string* error);

class ExpertStore {
 public:
  ExpertStore(const TernModel& model, ExpertStoreOptions options = {});
  ~ExpertStore();  // waits for reads in flight
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  // Starts reading expert `expert` of `layer` into dst (4 KiB aligned,
  // layer.stride bytes); `done(context, error)` runs exactly once.
  // Urgent reads (demand) go ahead of queued non-urgent ones (prefetch).
  void read_async(const ExpertLayer& layer, int64_t expert, uint8_t* dst, ReadDone done, void* context,
                  bool urgent = true);
  // A queued non-urgent read into dst becomes urgent (ExpertIO::promote).
  void promote(const uint8_t* dst) { io_->promote(dst); }
  // The blocking form: throws tern::Error on failure.
  void read(const ExpertLayer& layer, int64_t expert, uint8_t* dst);

  IoBackend backend() const { return io_->backend(); }
  bool direct_io() const;
  const TernModel& model() const { return model_; }
  std::vector<ReplicaInfo> replicas() const;

 private:
  struct Replica {
    std::string path;
    File buffered, direct;
    const uint8_t* mapped = nullptr;
    uint64_t size = 0;
    double weight = 1;
    std::atomic<bool> direct_failed{false};
    std::atomic<uint64_t> reads{0}, bytes{0}, failures{0};
  };
  struct Fault {
    int kind;  // 0 eio, 1 short, 2 corrupt
    int64_t layer, expert;  // -1: any
    int replica;            // -1: every replica
    mutable std::atomic<int64_t> left;  // reads still to fail (< 0: unlimited)
    Fault(int k, int64_t l, int64_t e, int r, int64_t n) : kind(k), layer(l), expert(e), replica(r), left(n) {}
  };
  struct Op {
    const ExpertLayer* layer = nullptr;
    int64_t expert = 0;
    uint8_t* dst = nullptr;
    ReadDone done = nullptr;
    void* context = nullptr;
    std::vector<int> order;  // replicas to try, in order
    size_t attempt = 0;
    bool direct = false;
    bool inject_eio = false;
    bool urgent = true;
    std::string errors;  // what failed so far
  };

  void open_replica(const std::filesystem::path& path, bool primary);
  void measure_replicas();
  std::vector<int> replica_order(int64_t layer, int64_t expert) const;
  void issue(uint64_t slot);
  void on_complete(uint64_t slot, int error);
  // Whether a fault of `kind` hits this read (consuming one of its times).
  bool fault(int kind, const Op& op, int replica) const;
  void finish(uint64_t slot, const std::string* error);

  const TernModel& model_;
  ExpertStoreOptions options_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::deque<Fault> faults_;
  std::unique_ptr<ExpertIO> io_;

  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::deque<Op> ops_;  // slot -> op (addresses stay valid as it grows)
  std::vector<uint64_t> free_ops_;
  uint64_t in_flight_ = 0;
};

}  // namespace tern
