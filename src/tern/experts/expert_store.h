#pragma once
// ExpertStore — where expert bytes live and how they are read: one pread per
// expert record from experts.bin, with O_DIRECT when the file system allows
// it (else a buffered read followed by POSIX_FADV_DONTNEED), so the page cache
// does not quietly hold the model and memory figures stay honest.
#include <atomic>
#include <cstdint>

#include "tern/core/file.h"
#include "tern/format/tern_model.h"

namespace tern {

struct ExpertStoreOptions {
  bool direct_io = true;  // O_DIRECT when supported
  bool verify = true;     // check each record's xxh3 after every read from disk
};

class ExpertStore {
 public:
  ExpertStore(const TernModel& model, ExpertStoreOptions options = {});

  // Reads expert `expert` of `layer` into dst, which must be 4 KiB aligned
  // and hold layer.stride bytes. Throws naming (layer, expert), file and
  // offset on a read error or checksum mismatch.
  void read(const ExpertLayer& layer, int64_t expert, uint8_t* dst) const;

  bool direct_io() const { return direct_.is_open(); }
  const TernModel& model() const { return model_; }

 private:
  bool read_direct(const ExpertLayer& layer, int64_t expert, uint8_t* dst) const;
  const TernModel& model_;
  ExpertStoreOptions options_;
  File direct_;
  mutable std::atomic<bool> direct_failed_{false};
};

}  // namespace tern
