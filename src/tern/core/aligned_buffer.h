#pragma once
// AlignedBuffer — an owned, aligned, uninitialised byte buffer (default 4 KiB
// alignment, as O_DIRECT reads need). Move-only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

namespace tern {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = 4096) : size_(size) {
    if (size == 0) return;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, (size + alignment - 1) / alignment * alignment) != 0) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tern
