#pragma once
// File — an owned file descriptor with exact positional reads/writes that
// throw tern::Error naming the path and offset. Plus whole-file helpers.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace tern {

class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  static File open_read(const std::filesystem::path& path);
  // Opens for O_DIRECT reads (offsets, sizes and buffers 4 KiB aligned).
  // Returns a closed File if the file system does not support O_DIRECT.
  static File open_direct(const std::filesystem::path& path);
  // Creates or truncates.
  static File create(const std::filesystem::path& path);

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t size() const;

  // Reads exactly n bytes at offset or throws (short read = truncated file).
  void pread_exact(void* dst, size_t n, uint64_t offset) const;
  // Reads up to n bytes at offset, stopping early only at end of file;
  // returns the bytes read. On a read error: with `error` set, stores errno
  // there and returns what was read before it; without, throws.
  size_t pread_upto(void* dst, size_t n, uint64_t offset, int* error = nullptr) const;
  void pwrite_all(const void* src, size_t n, uint64_t offset);
  void write_all(const void* src, size_t n);
  void truncate(uint64_t size);
  void sync();
  // Asks the kernel to start reading these bytes into the page cache now.
  void will_need(uint64_t offset, uint64_t length) const;
  // Tells the kernel these bytes will not be needed again (keeps page cache honest).
  void drop_cache(uint64_t offset, uint64_t length) const;
  // Writes back a just-written range and drops it from the page cache, so a
  // long write does not fill memory with dirty pages.
  void flush_and_drop(uint64_t offset, uint64_t length);
  // Starts writeback of a just-written range without waiting for it.
  void start_writeback(uint64_t offset, uint64_t length);
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

std::string read_text_file(const std::filesystem::path& path);
// Writes to a temporary sibling then renames: readers see old or new, never half.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);
void fsync_directory(const std::filesystem::path& dir);

}  // namespace tern
