// Helpers shared by the fuzz targets: scratch files and invariant failures.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fuzz_target.h"

namespace tern::fuzz {

namespace fs = std::filesystem;

namespace {

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (base / "tern-fuzz-XXXXXX").string();
    if (!::mkdtemp(templ.data())) broken("cannot create a scratch directory under " + base.string());
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

const fs::path& scratch_dir() {
  static ScratchDir dir;
  return dir.path;
}

void write_file(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) broken("cannot write " + path.string());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) broken("cannot write " + path.string());
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tern::fuzz
