#include "tern/experts/expert_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tern/core/aligned_buffer.h"
#include "tern/core/error.h"
#include "tern/core/hash.h"
#include "tern/core/log.h"
#include "tern/core/timeline.h"

namespace tern {

namespace {

constexpr int kEio = 0, kShort = 1, kCorrupt = 2, kSlow = 3;
constexpr auto kSlowRead = std::chrono::milliseconds(20);

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

ExpertStore::ExpertStore(const TernModel& model, ExpertStoreOptions options) : model_(model), options_(std::move(options)) {
  open_replica(model.dir() / model.manifest().experts_file, true);
  for (const auto& m : options_.mirrors) open_replica(m, false);
  if (replicas_.size() > 1) measure_replicas();

  std::string faults = options_.faults;
  if (faults.empty())
    if (const char* env = std::getenv("TERN_IO_FAULTS")) faults = env;
  for (const std::string& f : split(faults, ',')) {
    const auto parts = split(f, ':');
    const char* kinds[] = {"eio", "short", "corrupt", "slow"};
    int kind = -1;
    for (int k = 0; k < 4; ++k)
      if (!parts.empty() && parts[0] == kinds[k]) kind = k;
    if (kind < 0 || parts.size() < 3 || parts.size() > 5)
      fail("fault '{}' is not kind:layer:expert[:replica[:times]] with kind eio, short, corrupt or slow", f);
    auto num = [&](size_t i) -> int64_t {
      if (i >= parts.size() || parts[i] == "*") return -1;
      try {
        return std::stoll(parts[i]);
      } catch (const std::exception&) {
        fail("fault '{}': '{}' is not a number or *", f, parts[i]);
      }
    };
    faults_.emplace_back(kind, num(1), num(2), static_cast<int>(num(3)), num(4));
  }

  IoHandler handler = [this](uint64_t tag, int error) { on_complete(tag, error); };
  try {
    io_ = make_expert_io(options_.backend, options_.queue_depth, handler);
  } catch (const Error& e) {
    if (options_.backend != IoBackend::Uring) throw;
    log(LogLevel::Warn, "{}; reading experts with a pool of pread threads instead", e.what());
    io_ = make_expert_io(IoBackend::Pread, options_.queue_depth, handler);
  }
}

ExpertStore::~ExpertStore() {
  {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
  }
  io_.reset();
  for (auto& r : replicas_)
    if (r->mapped) ::munmap(const_cast<uint8_t*>(r->mapped), r->size);
}

void ExpertStore::open_replica(const std::filesystem::path& path, bool primary) {
  auto r = std::make_unique<Replica>();
  r->path = path.string();
  r->buffered = File::open_read(path);
  r->size = r->buffered.size();
  if (!primary && r->size != replicas_.front()->size)
    fail("--mirror {}: {} bytes, but {} has {}; a mirror must be a copy of experts.bin", r->path, r->size,
         replicas_.front()->path, replicas_.front()->size);
  if (options_.backend == IoBackend::Mmap) {
    void* p = r->size ? ::mmap(nullptr, r->size, PROT_READ, MAP_SHARED, r->buffered.fd(), 0) : nullptr;
    if (p == MAP_FAILED) fail("cannot map {}: {}", r->path, std::strerror(errno));
    r->mapped = static_cast<const uint8_t*>(p);
  } else if (options_.direct_io) {
    r->direct = File::open_direct(path);
  }
  replicas_.push_back(std::move(r));
}

void ExpertStore::measure_replicas() {
  // A few 4 MiB reads spread over each replica, bypassing the page cache.
  constexpr uint64_t kChunk = 4ull << 20;
  AlignedBuffer buf(kChunk);
  for (auto& r : replicas_) {
    const int fd = r->direct.is_open() ? r->direct.fd() : r->buffered.fd();
    uint64_t bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4 && r->size >= kChunk; ++i) {
      const uint64_t off = (r->size - kChunk) / 4 * static_cast<uint64_t>(i) / 4096 * 4096;
      const ssize_t n = ::pread(fd, buf.data(), kChunk, static_cast<off_t>(off));
      if (n > 0) bytes += static_cast<uint64_t>(n);
      r->buffered.drop_cache(off, kChunk);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r->weight = bytes > 0 && s > 0 ? static_cast<double>(bytes) / s : 1.0;
    log(LogLevel::Info, "expert replica {}: {:.0f} MiB/s", r->path, r->weight / (1 << 20));
  }
}

std::vector<int> ExpertStore::replica_order(int64_t layer, int64_t expert) const {
  // Weighted rendezvous hashing: replica i scores -ln(u_i) / w_i with u_i a
  // hash of (layer, expert, i) in (0, 1); lowest score first.
  std::vector<std::pair<double, int>> scored;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const uint64_t h = mix(mix(static_cast<uint64_t>(layer) * 0x100000001b3ull + static_cast<uint64_t>(expert)) + i);
    const double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
    scored.push_back({-std::log(u) / replicas_[i]->weight, static_cast<int>(i)});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<int> order;
  for (auto [score, i] : scored) order.push_back(i);
  return order;
}

bool ExpertStore::direct_io() const {
  const Replica& r = *replicas_.front();
  return r.direct.is_open() && !r.direct_failed.load(std::memory_order_relaxed);
}

std::vector<ReplicaInfo> ExpertStore::replicas() const {
  std::vector<ReplicaInfo> out;
  for (const auto& r : replicas_)
    out.push_back({r->path, replicas_.size() > 1 ? r->weight : 0.0, r->reads.load(), r->bytes.load(), r->failures.load()});
  return out;
}

void ExpertStore::read_async(const ExpertLayer& layer, int64_t expert, uint8_t* dst, ReadDone done, void* context,
                             bool urgent) {
  if (expert < 0 || expert >= layer.num_experts)
    fail("expert {} out of range for layer {} ({} experts)", expert, layer.layer, layer.num_experts);
  uint64_t slot;
  {
    std::lock_guard lock(mu_);
    if (!free_ops_.empty()) {
      slot = free_ops_.back();
      free_ops_.pop_back();
    } else {
      slot = ops_.size();
      ops_.emplace_back();
    }
    Op& op = ops_[slot];
    op = Op{};
    op.layer = &layer;
    op.expert = expert;
    op.dst = dst;
    op.done = done;
    op.context = context;
    op.order = replica_order(layer.layer, expert);
    op.urgent = urgent;
    ++in_flight_;
  }
  issue(slot);
}

void ExpertStore::issue(uint64_t slot) {
  Op* op;
  {
    std::lock_guard lock(mu_);
    op = &ops_[slot];
  }
  const int ri = op->order[op->attempt];
  Replica& r = *replicas_[static_cast<size_t>(ri)];
  op->direct = r.direct.is_open() && !r.direct_failed.load(std::memory_order_relaxed);
  IoRequest req;
  req.offset = op->layer->expert_offset(op->expert);
  // O_DIRECT reads the whole 4 KiB-padded stride (records start aligned and
  // the file is padded), buffered reads just the record.
  req.length = op->direct ? op->layer->stride : op->layer->record_size;
  req.dst = op->dst;
  req.tag = slot;
  req.fd = op->direct ? r.direct.fd() : r.buffered.fd();
  req.mapped = r.mapped;
  req.urgent = op->urgent;
  // An injected EIO still completes on the I/O thread, like a real one: the
  // backend fails to read from no file, and on_complete reports EIO.
  op->inject_eio = fault(kEio, *op, ri);
  if (op->inject_eio) req.fd = -1, req.mapped = nullptr;
  io_->submit(req);
}

bool ExpertStore::fault(int kind, const Op& op, int replica) const {
  for (const Fault& f : faults_) {
    if (f.kind != kind || (f.layer >= 0 && f.layer != op.layer->layer) || (f.expert >= 0 && f.expert != op.expert) ||
        (f.replica >= 0 && f.replica != replica))
      continue;
    int64_t left = f.left.load();
    if (left < 0) return true;
    while (left > 0)
      if (f.left.compare_exchange_weak(left, left - 1)) return true;
  }
  return false;
}

void ExpertStore::on_complete(uint64_t slot, int error) {
  Op* op;
  {
    std::lock_guard lock(mu_);
    op = &ops_[slot];
  }
  const int ri = op->order[op->attempt];
  Replica& r = *replicas_[static_cast<size_t>(ri)];
  const ExpertLayer& layer = *op->layer;
  const uint64_t offset = layer.expert_offset(op->expert);
  timeline::mark(timeline::kDevice, layer.layer, op->expert);
  if (op->inject_eio) error = EIO;
  if (error == EINVAL && op->direct) {
    // Some file systems accept O_DIRECT at open but not at read.
    if (!r.direct_failed.exchange(true)) log(LogLevel::Debug, "O_DIRECT reads unsupported on {}; using buffered reads", r.path);
    issue(slot);
    return;
  }
  if (fault(kSlow, *op, ri)) std::this_thread::sleep_for(kSlowRead);  // on the I/O thread: the read is in flight longer
  if (!error && fault(kShort, *op, ri)) error = ENODATA;
  std::string problem;
  if (error) {
    problem = error == ENODATA ? fmt::format("unexpected end of file in {} reading offset {} + {} (truncated?)", r.path, offset, layer.record_size)
                               : fmt::format("read error in {} at offset {}: {}", r.path, offset, std::strerror(error));
  } else {
    if (!op->direct && !r.mapped) r.buffered.drop_cache(offset, layer.record_size);
    if (fault(kCorrupt, *op, ri)) op->dst[layer.record_size / 2] ^= 0x5a;
    if (options_.verify) {
      const uint64_t got = xxh3_64(op->dst, layer.record_size);
      const uint64_t want = layer.checksums[static_cast<size_t>(op->expert)];
      if (got != want)
        problem = fmt::format("checksum mismatch in {} at offset {} (expected {}, got {}); the file is corrupt, reinstall "
                              "the model",
                              r.path, offset, hash_hex(want), hash_hex(got));
    }
  }
  r.reads.fetch_add(1, std::memory_order_relaxed);
  if (problem.empty()) {
    r.bytes.fetch_add(layer.record_size, std::memory_order_relaxed);
    finish(slot, nullptr);
    return;
  }
  r.failures.fetch_add(1, std::memory_order_relaxed);
  op->errors += (op->errors.empty() ? "" : "; ") + problem;
  if (op->attempt + 1 < op->order.size()) {
    log(LogLevel::Warn, "expert (layer {}, expert {}): {}; retrying on {}", layer.layer, op->expert, problem,
        replicas_[static_cast<size_t>(op->order[op->attempt + 1])]->path);
    ++op->attempt;
    issue(slot);
    return;
  }
  const std::string message = fmt::format("reading expert (layer {}, expert {}): {}", layer.layer, op->expert, op->errors);
  finish(slot, &message);
}

void ExpertStore::finish(uint64_t slot, const std::string* error) {
  Op* op;
  {
    std::lock_guard lock(mu_);
    op = &ops_[slot];
  }
  const ReadDone done = op->done;
  void* context = op->context;
  done(context, error);
  std::lock_guard lock(mu_);
  free_ops_.push_back(slot);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

namespace {

struct SyncRead {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;
  static void complete(void* ctx, const std::string* error) {
    auto* self = static_cast<SyncRead*>(ctx);
    std::lock_guard lock(self->mu);
    if (error) self->error = *error;
    self->done = true;
    self->cv.notify_all();
  }
};

}  // namespace

void ExpertStore::read(const ExpertLayer& layer, int64_t expert, uint8_t* dst) {
  SyncRead s;
  read_async(layer, expert, dst, &SyncRead::complete, &s);
  std::unique_lock lock(s.mu);
  s.cv.wait(lock, [&] { return s.done; });
  if (!s.error.empty()) fail("{}", s.error);
}

}  // namespace tern
