// ExpertIO: a demanded read that was queued as a prefetch moves ahead of the
// other queued prefetches (promote), on every backend; RecordArena: buffers
// are 4 KiB-aligned, reused, and faulted in once.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "support/models.h"
#include "tern/experts/expert_io.h"
#include "tern/experts/record_arena.h"

namespace tern {
namespace {

using testing::TempDir;

class ExpertIoOrder : public ::testing::TestWithParam<IoBackend> {};

TEST_P(ExpertIoOrder, PromotedReadGoesAheadOfQueuedPrefetches) {
  TempDir dir;
  const std::string path = (dir / "data.bin").string();
  constexpr int kReads = 16;
  constexpr size_t kBytes = 4096;
  {
    std::vector<char> bytes(kReads * kBytes, 'x');
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // The first completion holds the I/O thread until the test has queued
  // every read and promoted the last: the order after it is deterministic.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<uint64_t> order;
  auto io = make_expert_io(GetParam(), 1, [&](uint64_t tag, int error) {
    std::unique_lock lock(mu);
    EXPECT_EQ(error, 0);
    order.push_back(tag);
    cv.notify_all();
    if (order.size() == 1) cv.wait(lock, [&] { return release; });
  });
  std::vector<std::vector<uint8_t>> buffers(kReads, std::vector<uint8_t>(kBytes));
  auto submit = [&](int i) {
    IoRequest r;
    r.fd = fd;
    r.offset = static_cast<uint64_t>(i) * kBytes;
    r.length = kBytes;
    r.dst = buffers[static_cast<size_t>(i)].data();
    r.tag = static_cast<uint64_t>(i);
    r.urgent = false;
    io->submit(r);
  };
  submit(0);
  {  // read 0 has completed and its handler holds the I/O thread
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return order.size() == 1; });
  }
  for (int i = 1; i < kReads; ++i) submit(i);
  io->promote(buffers[kReads - 1].data());
  {
    std::unique_lock lock(mu);
    release = true;
    cv.notify_all();
    cv.wait(lock, [&] { return order.size() == kReads; });
  }
  ::close(fd);
  // Read 0 first; uring's free slot took read 1 at once (on the device, not
  // queued). The promoted read comes next, then the rest in order.
  const size_t on_device = GetParam() == IoBackend::Uring ? 2 : 1;
  ASSERT_EQ(order.size(), static_cast<size_t>(kReads));
  EXPECT_EQ(order[on_device], static_cast<uint64_t>(kReads - 1));
  for (size_t i = on_device + 1; i < order.size(); ++i) EXPECT_LT(order[i], static_cast<uint64_t>(kReads - 1));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExpertIoOrder, ::testing::Values(IoBackend::Uring, IoBackend::Pread),
                         [](const auto& info) { return std::string(io_backend_name(info.param)); });

TEST(RecordArena, BuffersAreAlignedReusedAndFaultedInOnce) {
  RecordArena arena;
  RecordBuffer a = arena.take(5000);  // rounded up to 4 KiB pages
  EXPECT_EQ(a.size(), 8192u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  a.prefault();
  a.data()[0] = 7;
  uint8_t* first = a.data();
  RecordBuffer b = arena.take(8192);
  EXPECT_NE(b.data(), first);
  a = RecordBuffer();  // back to the free list, pages kept
  RecordBuffer c = arena.take(8192);
  EXPECT_EQ(c.data(), first);  // reused
  EXPECT_EQ(c.data()[0], 7);   // resident: not faulted in again (prefault is a no-op)
  c.prefault();
  EXPECT_EQ(c.data()[0], 7);
  // Records of one size share chunks of a whole number of records (64 MiB
  // of 8 KiB ones; of 1 MiB ones, two for 100); one larger than a chunk gets
  // its own. Nothing is reserved beyond them.
  std::vector<RecordBuffer> many;
  for (int i = 0; i < 100; ++i) many.push_back(arena.take(1 << 20));
  RecordBuffer big = arena.take(RecordArena::kChunkBytes + 4096);
  EXPECT_EQ(arena.reserved_bytes(), 3 * RecordArena::kChunkBytes + (RecordArena::kChunkBytes + 4096));
}

}  // namespace
}  // namespace tern
