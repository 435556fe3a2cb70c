#include "tern/experts/expert_io.h"

#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "tern/core/error.h"

namespace tern {

std::string_view io_backend_name(IoBackend backend) {
  switch (backend) {
    case IoBackend::Uring: return "uring";
    case IoBackend::Pread: return "pread";
    case IoBackend::Mmap: return "mmap";
  }
  return "?";
}

IoBackend parse_io_backend(std::string_view name) {
  for (IoBackend b : {IoBackend::Uring, IoBackend::Pread, IoBackend::Mmap})
    if (name == io_backend_name(b)) return b;
  fail("--io '{}' is not one of: uring, pread, mmap", name);
}

namespace {

// A uring read and the bytes of it already read (short reads continue).
struct InFlight {
  IoRequest request;
  uint64_t done = 0;
};

const IoRequest& request_of(const IoRequest& r) { return r; }
const IoRequest& request_of(const InFlight& f) { return f.request; }

// Queues r behind the urgent requests already queued (FIFO among each kind).
template <typename Queue, typename Item>
void enqueue(Queue& q, Item item, bool urgent) {
  if (!urgent) {
    q.push_back(std::move(item));
    return;
  }
  auto it = q.begin();
  while (it != q.end() && request_of(*it).urgent) ++it;
  q.insert(it, std::move(item));
}

// Moves the queued non-urgent request into dst behind the urgent ones.
template <typename Queue>
void promote_in(Queue& q, const uint8_t* dst) {
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (request_of(*it).urgent || request_of(*it).dst != dst) continue;
    auto item = std::move(*it);
    q.erase(it);
    const_cast<IoRequest&>(request_of(item)).urgent = true;
    enqueue(q, std::move(item), true);
    return;
  }
}

// Reads the whole request with pread, retrying short reads and EINTR.
int pread_all(const IoRequest& r) {
  uint64_t done = 0;
  while (done < r.length) {
    const ssize_t n = ::pread(r.fd, r.dst + done, r.length - done, static_cast<off_t>(r.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENODATA;
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

// Worker threads that each take one request at a time from a shared queue.
class ThreadedIO : public ExpertIO {
 public:
  ThreadedIO(IoBackend backend, int threads, IoHandler handler) : backend_(backend), handler_(std::move(handler)) {
    for (int i = 0; i < std::max(1, threads); ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadedIO() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  void submit(const IoRequest& r) override {
    {
      std::lock_guard lock(mu_);
      enqueue(queue_, r, r.urgent);
    }
    cv_.notify_one();
  }
  void promote(const uint8_t* dst) override {
    std::lock_guard lock(mu_);
    promote_in(queue_, dst);
  }
  IoBackend backend() const override { return backend_; }

 private:
  void work() {
    for (;;) {
      IoRequest r;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        r = queue_.front();
        queue_.pop_front();
      }
      int error = 0;
      if (backend_ == IoBackend::Mmap) {
        if (!r.mapped) error = EINVAL;
        else std::memcpy(r.dst, r.mapped + r.offset, r.length);  // the page faults are the reads
      } else {
        error = pread_all(r);
      }
      handler_(r.tag, error);
    }
  }
  IoBackend backend_;
  IoHandler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<IoRequest> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// io_uring: callers submit under a lock (the submission ring has one
// producer at a time); one thread reaps completions, resubmits the rest of a
// short read and submits queued requests as slots free up.
class UringIO : public ExpertIO {
 public:
  UringIO(int depth, IoHandler handler) : depth_(std::max(1, depth)), handler_(std::move(handler)) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth_ + 1), &ring_, 0);
    if (rc < 0) fail("io_uring unavailable: {}", std::strerror(-rc));
    slots_.resize(static_cast<size_t>(depth_));
    for (int i = depth_ - 1; i >= 0; --i) free_.push_back(i);
    reaper_ = std::thread([this] { reap(); });
  }
  ~UringIO() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // a slot is always left for this
      if (sqe) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, kStop);
        io_uring_submit(&ring_);
      }
    }
    reaper_.join();
    io_uring_queue_exit(&ring_);
  }
  void submit(const IoRequest& r) override {
    std::lock_guard lock(mu_);
    enqueue(pending_, InFlight{r, 0}, r.urgent);
    submit_pending();
  }
  void promote(const uint8_t* dst) override {
    std::lock_guard lock(mu_);
    promote_in(pending_, dst);
  }
  IoBackend backend() const override { return IoBackend::Uring; }

 private:
  static constexpr uint64_t kStop = ~0ull;

  // Under mu_: moves queued requests into free slots and submits them.
  void submit_pending() {
    bool any = false;
    while (!pending_.empty() && !free_.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (!sqe) break;
      const int slot = free_.back();
      free_.pop_back();
      InFlight& f = slots_[static_cast<size_t>(slot)];
      f = pending_.front();
      pending_.pop_front();
      io_uring_prep_read(sqe, f.request.fd, f.request.dst + f.done, static_cast<unsigned>(f.request.length - f.done),
                         f.request.offset + f.done);
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(slot));
      any = true;
    }
    if (any) io_uring_submit(&ring_);
  }

  void reap() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) return;  // the ring is gone: nothing more can complete
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (data == kStop) return;
      std::unique_lock lock(mu_);
      InFlight& f = slots_[static_cast<size_t>(data)];
      int error = 0;
      bool finished = true;
      if (res == -EINTR || res == -EAGAIN) {
        finished = false;  // try the same bytes again
      } else if (res < 0) {
        error = -res;
      } else if (res == 0) {
        error = ENODATA;
      } else {
        f.done += static_cast<uint64_t>(res);
        finished = f.done >= f.request.length;
      }
      if (!finished) {
        pending_.push_front(f);  // the rest of a short read, first in line
        free_.push_back(static_cast<int>(data));
        submit_pending();
        continue;
      }
      const uint64_t tag = f.request.tag;
      free_.push_back(static_cast<int>(data));
      submit_pending();
      lock.unlock();
      handler_(tag, error);
    }
  }

  const int depth_;
  IoHandler handler_;
  io_uring ring_{};
  std::mutex mu_;
  std::vector<InFlight> slots_;
  std::vector<int> free_;
  std::deque<InFlight> pending_;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace

std::unique_ptr<ExpertIO> make_expert_io(IoBackend backend, int queue_depth, IoHandler handler) {
  if (backend == IoBackend::Uring) return std::make_unique<UringIO>(queue_depth, std::move(handler));
  return std::make_unique<ThreadedIO>(backend, queue_depth, std::move(handler));
}

}  // namespace tern
