// Session::save / Session::load: a kept conversation in a file.
//
//   "TERNKV2\0", u64 fingerprint, u64 context, u64 layers, u64 tokens
//   i32 token ids
//   per layer: u64 capacity, u64 kv_dim, u64 state floats
//   per layer: keys then values of the positions in use (a full layer:
//     tokens x kv_dim floats; a ring layer: its whole ring; a latent cache,
//     whose values are its keys: keys only), or a state layer's state
//   u64 checkpoints; each: u64 position, then the ring layers' keys and
//     values, then the state layers' states
//   u64 xxh3-64 of every byte before it
// Little-endian, as the machine that wrote it (the fingerprint ties a file
// to one model and context, so it is only ever read back where it was made).
#include <cstring>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/hash.h"
#include "tern/runtime/engine.h"

namespace tern {

namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'K', 'V', '2', '\0'};

class HashedWriter {
 public:
  explicit HashedWriter(File& f) : f_(f) {}
  void bytes(const void* p, size_t n) {
    hasher_.update(p, n);
    f_.write_all(p, n);
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  uint64_t digest() const { return hasher_.digest(); }

 private:
  File& f_;
  Hasher hasher_;
};

class HashedReader {
 public:
  HashedReader(const File& f, std::string what) : f_(f), size_(f.size()), what_(std::move(what)) {}
  void bytes(void* p, size_t n) {
    if (n > size_ - std::min(size_, pos_)) fail("{}: truncated (needs {} bytes at offset {}, has {})", what_, n, pos_, size_);
    f_.pread_exact(p, n, pos_);
    hasher_.update(p, n);
    pos_ += n;
  }
  uint64_t u64() {
    uint64_t v = 0;
    bytes(&v, sizeof v);
    return v;
  }
  uint64_t digest() const { return hasher_.digest(); }
  uint64_t position() const { return pos_; }
  uint64_t size() const { return size_; }
  const std::string& what() const { return what_; }

 private:
  const File& f_;
  uint64_t size_, pos_ = 0;
  std::string what_;
  Hasher hasher_;
};

// Floats of layer l's keys (or values) that a session of n tokens uses
// (a state layer: its state, stored as keys).
size_t used_floats(const KVCache& kv, int64_t l, int64_t n) {
  if (kv.is_state_layer(l)) return static_cast<size_t>(kv.state_floats(l));
  const int64_t positions = kv.is_ring(l) ? kv.capacity(l) : n;
  return static_cast<size_t>(positions * kv.kv_dim(l));
}

// Where layer l's keys (a state layer: its state) and values start.
float* layer_keys(KVCache& kv, int64_t l) { return kv.is_state_layer(l) ? kv.state(l) : kv.keys(l, 0); }
bool has_values(const KVCache& kv, int64_t l) { return !kv.is_state_layer(l) && !kv.values_alias_keys(); }

}  // namespace

uint64_t Session::fingerprint(const Engine& engine) {
  const std::string manifest = read_text_file(engine.container().dir() / "manifest.json");
  const uint64_t context = static_cast<uint64_t>(engine.context());
  return xxh3_64(manifest.data(), manifest.size()) ^ (context * 0x9e3779b97f4a7c15ull);
}

void Session::save(const std::filesystem::path& path, uint64_t fingerprint) const {
  auto tmp = path;
  tmp += ".tmp";
  {
    File f = File::create(tmp);
    HashedWriter w(f);
    w.bytes(kMagic, sizeof kMagic);
    w.u64(fingerprint);
    w.u64(static_cast<uint64_t>(kv_.max_positions()));
    w.u64(static_cast<uint64_t>(kv_.layers()));
    w.u64(tokens_.size());
    w.bytes(tokens_.data(), tokens_.size() * sizeof(int32_t));
    for (int64_t l = 0; l < kv_.layers(); ++l) {
      w.u64(static_cast<uint64_t>(kv_.capacity(l)));
      w.u64(static_cast<uint64_t>(kv_.kv_dim(l)));
      w.u64(static_cast<uint64_t>(kv_.state_floats(l)));
    }
    auto& kv = const_cast<KVCache&>(kv_);  // keys()/values() are not const; nothing is written
    const auto n = static_cast<int64_t>(tokens_.size());
    for (int64_t l = 0; l < kv_.layers(); ++l) {
      w.bytes(layer_keys(kv, l), used_floats(kv_, l, n) * sizeof(float));
      if (has_values(kv_, l)) w.bytes(kv.values(l, 0), used_floats(kv_, l, n) * sizeof(float));
    }
    w.u64(checkpoints_.size());
    for (const auto& c : checkpoints_) {
      w.u64(static_cast<uint64_t>(c.position));
      w.bytes(c.k.data(), c.k.size() * sizeof(float));
      w.bytes(c.v.data(), c.v.size() * sizeof(float));
      w.bytes(c.state.data(), c.state.size() * sizeof(float));
    }
    const uint64_t digest = w.digest();
    f.write_all(&digest, sizeof digest);
    f.sync();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message());
  if (path.has_parent_path()) fsync_directory(path.parent_path());
}

void Session::load(const std::filesystem::path& path, uint64_t fingerprint) {
  reset();
  try {
    File f = File::open_read(path);
    HashedReader r(f, path.string());
    char magic[sizeof kMagic];
    r.bytes(magic, sizeof magic);
    if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) fail("{}: not a Tern session file", r.what());
    if (r.u64() != fingerprint) fail("{}: saved for another model or --ctx", r.what());
    if (r.u64() != static_cast<uint64_t>(kv_.max_positions()) || r.u64() != static_cast<uint64_t>(kv_.layers()))
      fail("{}: KV layout differs from this model's", r.what());
    const uint64_t n = r.u64();
    if (n >= static_cast<uint64_t>(kv_.max_positions())) fail("{}: {} tokens do not fit the context", r.what(), n);
    std::vector<int32_t> tokens(n);
    r.bytes(tokens.data(), n * sizeof(int32_t));
    const int64_t vocab = engine_.config().vocab_size;
    for (int32_t t : tokens)
      if (t < 0 || t >= vocab) fail("{}: token id {} outside the vocabulary", r.what(), t);
    for (int64_t l = 0; l < kv_.layers(); ++l) {
      const uint64_t capacity = r.u64(), width = r.u64(), state = r.u64();
      if (capacity != static_cast<uint64_t>(kv_.capacity(l)) || width != static_cast<uint64_t>(kv_.kv_dim(l)) ||
          state != static_cast<uint64_t>(kv_.state_floats(l)))
        fail("{}: layer {}'s KV shape differs from this model's", r.what(), l);
    }
    for (int64_t l = 0; l < kv_.layers(); ++l) {
      const size_t floats = used_floats(kv_, l, static_cast<int64_t>(n));
      r.bytes(layer_keys(kv_, l), floats * sizeof(float));
      if (has_values(kv_, l)) r.bytes(kv_.values(l, 0), floats * sizeof(float));
    }
    const uint64_t checkpoints = r.u64();
    if (checkpoints > kMaxCheckpoints) fail("{}: {} checkpoints (at most {})", r.what(), checkpoints, kMaxCheckpoints);
    std::vector<KVCache::RingSnapshot> saved(checkpoints);
    for (auto& c : saved) {
      c.position = static_cast<int64_t>(r.u64());
      if (c.position < 0 || static_cast<uint64_t>(c.position) > n) fail("{}: checkpoint beyond the tokens", r.what());
      const auto ring = static_cast<size_t>(kv_.total_ring_floats());
      c.k.resize(ring);
      c.v.resize(kv_.values_alias_keys() ? 0 : ring);
      c.state.resize(static_cast<size_t>(kv_.total_state_floats()));
      r.bytes(c.k.data(), c.k.size() * sizeof(float));
      r.bytes(c.v.data(), c.v.size() * sizeof(float));
      r.bytes(c.state.data(), c.state.size() * sizeof(float));
    }
    const uint64_t digest = r.digest();
    uint64_t stored = 0;
    f.pread_exact(&stored, sizeof stored, r.position());
    if (r.position() + sizeof stored != r.size()) fail("{}: {} bytes after the end", r.what(), r.size() - r.position() - sizeof stored);
    if (stored != digest) fail("{}: checksum mismatch (the file is corrupt)", r.what());
    tokens_ = std::move(tokens);
    checkpoints_ = std::move(saved);
  } catch (...) {
    reset();
    throw;
  }
}

}  // namespace tern
