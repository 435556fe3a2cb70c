#include "tern/experts/record_arena.h"

#include <sys/mman.h>

#include <new>

namespace tern {

RecordBuffer& RecordBuffer::operator=(RecordBuffer&& o) noexcept {
  if (this != &o) {
    release();
    arena_ = std::exchange(o.arena_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fresh_ = std::exchange(o.fresh_, false);
  }
  return *this;
}

void RecordBuffer::release() {
  if (arena_ && data_) arena_->give(data_, size_);
  arena_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

void RecordBuffer::prefault() {
  if (!fresh_) return;
  // One write per 4 KiB page: a huge page faults in on its first; the rest
  // are plain stores. The read overwrites the bytes.
  for (size_t off = 0; off < size_; off += 4096) reinterpret_cast<volatile uint8_t*>(data_)[off] = 0;
  fresh_ = false;
}

RecordArena::~RecordArena() {
  for (const Chunk& c : chunks_) ::munmap(c.base, c.size);
}

RecordBuffer RecordArena::take(size_t bytes) {
  bytes = (bytes + 4095) / 4096 * 4096;
  std::lock_guard lock(mu_);
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    const Free f = it->second.back();
    it->second.pop_back();
    return RecordBuffer(this, f.data, bytes, !f.resident);
  }
  Open& open = open_[bytes];
  if (open.left < bytes) {
    // A new chunk for records of this size: a whole number of them (no tail
    // a huge page could back beyond the last record), starting on a 2 MiB
    // boundary so huge pages cover it.
    const size_t size = std::max<size_t>(1, kChunkBytes / bytes) * bytes;
    void* p = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    auto* raw = static_cast<uint8_t*>(p);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~(kHugePage - 1));
    // Unmap the unaligned head and the tail; keep [base, base + size).
    if (base > raw) ::munmap(raw, static_cast<size_t>(base - raw));
    const size_t tail = static_cast<size_t>(raw + size + kHugePage - (base + size));
    if (tail > 0) ::munmap(base + size, tail);
    ::madvise(base, size, MADV_HUGEPAGE);  // advice only: without THP, 4 KiB pages
    chunks_.push_back({base, size});
    open = {base, size};
  }
  uint8_t* data = open.next;
  open.next += bytes;
  open.left -= bytes;
  return RecordBuffer(this, data, bytes, true);
}

void RecordArena::give(uint8_t* data, size_t size) {
  std::lock_guard lock(mu_);
  std::vector<Free>& list = free_[size];
  size_t resident = 0;
  for (const Free& f : list) resident += f.resident ? 1 : 0;
  const bool keep = resident < kKeepFreePerSize;
  if (!keep) ::madvise(data, size, MADV_DONTNEED);  // its pages go back; its addresses stay ours
  list.push_back({data, keep});
}

size_t RecordArena::reserved_bytes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.size;
  return n;
}

}  // namespace tern
