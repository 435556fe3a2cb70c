#pragma once
// RecordArena — the memory of the expert cache: record buffers carved from
// large chunks of anonymous memory advised for transparent huge pages, and
// reused (a freed buffer goes to a free list of its size, never back to the
// system until the arena dies).
//
// Why (docs/RESULTS.md, "the first touch of cache memory"): a buffer of
// fresh pages that an O_DIRECT read fills by DMA is slow on its first CPU
// access, one minor fault per 4 KiB page (measured on this project's VMs:
// hashing 5 MiB records ran at 0.6 GB/s instead of 14), and so is touching
// it first page by page. Huge pages take 512x fewer faults, and a buffer
// faulted in by the CPU before the read (prefault()) is read and hashed at
// full speed. The budget stays the cache's: the arena holds at most the
// live buffers plus a few free ones per size; beyond that, a freed buffer's
// pages are returned (MADV_DONTNEED) and faulted in again on reuse.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tern {

class RecordArena;

// A move-only buffer of the arena; returns its memory on destruction.
class RecordBuffer {
 public:
  RecordBuffer() = default;
  RecordBuffer(RecordBuffer&& o) noexcept
      : arena_(std::exchange(o.arena_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        fresh_(std::exchange(o.fresh_, false)) {}
  RecordBuffer& operator=(RecordBuffer&& o) noexcept;
  ~RecordBuffer() { release(); }
  RecordBuffer(const RecordBuffer&) = delete;
  RecordBuffer& operator=(const RecordBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Faults every page in from the CPU (once per buffer whose pages are not
  // resident yet; a no-op after), so a read into it and its first use run
  // at memory speed. Call it without holding locks: it can take milliseconds.
  void prefault();

 private:
  friend class RecordArena;
  RecordBuffer(RecordArena* arena, uint8_t* data, size_t size, bool fresh)
      : arena_(arena), data_(data), size_(size), fresh_(fresh) {}
  void release();
  RecordArena* arena_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool fresh_ = false;  // pages not yet faulted in
};

class RecordArena {
 public:
  RecordArena() = default;
  ~RecordArena();
  RecordArena(const RecordArena&) = delete;
  RecordArena& operator=(const RecordArena&) = delete;

  // A 4 KiB-aligned buffer of `bytes` (thread-safe). Throws std::bad_alloc
  // when the system has no memory left.
  RecordBuffer take(size_t bytes);
  // Bytes of address space reserved (chunks), for tests.
  size_t reserved_bytes() const;

  static constexpr size_t kChunkBytes = size_t{64} << 20;  // at most; a whole number of records
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kKeepFreePerSize = 4;  // free buffers of one size kept resident

 private:
  friend class RecordBuffer;
  void give(uint8_t* data, size_t size);
  struct Chunk {
    uint8_t* base = nullptr;
    size_t size = 0;
  };
  struct Free {
    uint8_t* data;
    bool resident;
  };
  struct Open {  // the chunk records of one size are carved from
    uint8_t* next = nullptr;
    size_t left = 0;
  };
  mutable std::mutex mu_;
  std::vector<Chunk> chunks_;
  std::unordered_map<size_t, Open> open_;
  std::unordered_map<size_t, std::vector<Free>> free_;
};

}  // namespace tern
