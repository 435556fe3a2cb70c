#include "tern/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tern/core/error.h"

namespace tern {

File::~File() { close(); }

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

File File::open_read(const std::filesystem::path& path) {
  File f;
  f.path_ = path.string();
  f.fd_ = ::open(f.path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) fail("cannot open {}: {}", f.path_, std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd_, &st) == 0 && S_ISDIR(st.st_mode)) fail("{} is a directory, expected a file", f.path_);
  return f;
}

File File::open_direct(const std::filesystem::path& path) {
  File f;
  f.path_ = path.string();
  f.fd_ = ::open(f.path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (f.fd_ < 0 && errno != EINVAL) fail("cannot open {}: {}", f.path_, std::strerror(errno));
  return f;
}

File File::create(const std::filesystem::path& path) {
  File f;
  f.path_ = path.string();
  f.fd_ = ::open(f.path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd_ < 0) fail("cannot create {}: {}", f.path_, std::strerror(errno));
  return f;
}

uint64_t File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail("cannot stat {}: {}", path_, std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

void File::pread_exact(void* dst, size_t n, uint64_t offset) const {
  if (pread_upto(dst, n, offset) < n)
    fail("unexpected end of file in {}: wanted {} bytes at offset {}, file has {} bytes "
         "(truncated?)",
         path_, n, offset, size());
}

size_t File::pread_upto(void* dst, size_t n, uint64_t offset, int* error) const {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (error) {
        *error = errno;
        return done;
      }
      fail("read error in {} at offset {}: {}", path_, offset + done, std::strerror(errno));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

void File::pwrite_all(const void* src, size_t n, uint64_t offset) {
  const auto* p = static_cast<const char*>(src);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("write error in {} at offset {}: {}", path_, offset + done, std::strerror(errno));
    }
    done += static_cast<size_t>(r);
  }
}

void File::write_all(const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::write(fd_, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("write error in {}: {}", path_, std::strerror(errno));
    }
    done += static_cast<size_t>(r);
  }
}

void File::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    fail("cannot resize {} to {} bytes: {}", path_, size, std::strerror(errno));
}

void File::sync() {
  if (::fsync(fd_) != 0) fail("fsync {} failed: {}", path_, std::strerror(errno));
}

void File::drop_cache(uint64_t offset, uint64_t length) const {
  if (fd_ >= 0) ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                                POSIX_FADV_DONTNEED);
}

void File::will_need(uint64_t offset, uint64_t length) const {
  if (fd_ >= 0) ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_WILLNEED);
}

void File::flush_and_drop(uint64_t offset, uint64_t length) {
  if (fd_ < 0) return;
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  drop_cache(offset, length);
}

void File::start_writeback(uint64_t offset, uint64_t length) {
  if (fd_ >= 0) ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
}

void File::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string read_text_file(const std::filesystem::path& path) {
  File f = File::open_read(path);
  uint64_t n = f.size();
  if (n > (1ull << 31)) fail("{} is too large to be a text file ({} bytes)", path.string(), n);
  std::string s(n, '\0');
  f.pread_exact(s.data(), n, 0);
  return s;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  auto tmp = path;
  tmp += ".tmp";
  {
    File f = File::create(tmp);
    f.write_all(content.data(), content.size());
    f.sync();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message());
  if (path.has_parent_path()) fsync_directory(path.parent_path());
}

void fsync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace tern
