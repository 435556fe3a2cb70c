#include "tern/experts/expert_store.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tern/core/error.h"
#include "tern/core/log.h"

namespace tern {

ExpertStore::ExpertStore(const TernModel& model, ExpertStoreOptions options) : model_(model), options_(options) {
  if (options_.direct_io) direct_ = File::open_direct(model.dir() / model.manifest().experts_file);
}

bool ExpertStore::read_direct(const ExpertLayer& layer, int64_t expert, uint8_t* dst) const {
  // The whole stride is read: records start 4 KiB aligned and the file is
  // padded to a 4 KiB multiple, so [offset, offset + stride) is always inside.
  const uint64_t offset = layer.expert_offset(expert);
  uint64_t done = 0;
  while (done < layer.stride) {
    ssize_t r = ::pread(direct_.fd(), dst + done, layer.stride - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && done == 0) {
      // Some file systems accept O_DIRECT at open but not at read.
      if (!direct_failed_.exchange(true)) log(LogLevel::Debug, "O_DIRECT reads unsupported; using buffered reads");
      return false;
    }
    if (r < 0)
      fail("read error for expert (layer {}, expert {}) in {} at offset {}: {}", layer.layer, expert,
           direct_.path(), offset + done, std::strerror(errno));
    if (r == 0)
      fail("unexpected end of file reading expert (layer {}, expert {}) in {} at offset {} (truncated?)",
           layer.layer, expert, direct_.path(), offset + done);
    done += static_cast<uint64_t>(r);
  }
  return true;
}

void ExpertStore::read(const ExpertLayer& layer, int64_t expert, uint8_t* dst) const {
  if (expert < 0 || expert >= layer.num_experts)
    fail("expert {} out of range for layer {} ({} experts)", expert, layer.layer, layer.num_experts);
  bool done = direct_.is_open() && !direct_failed_.load(std::memory_order_relaxed) && read_direct(layer, expert, dst);
  if (!done) {
    try {
      model_.read_expert(layer, expert, dst);
    } catch (const Error& e) {
      fail("reading expert (layer {}, expert {}): {}", layer.layer, expert, e.what());
    }
    model_.experts_file().drop_cache(layer.expert_offset(expert), layer.record_size);
  }
  if (options_.verify) model_.check_expert(layer, expert, dst);
}

}  // namespace tern
