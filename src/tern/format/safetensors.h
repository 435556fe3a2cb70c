#pragma once
// Safetensors reading (single file and sharded checkpoints) and writing.
//
// A safetensors file is: u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the data section.
// Every offset and size read from a file is validated before it is trusted.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/file.h"

namespace tern {

// One tensor of a safetensors file: where its bytes are and what they mean.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t nbytes = 0;
  uint32_t file_index = 0;  // which shard of a SafetensorsCheckpoint

  uint64_t numel() const;
};

std::string shape_str(const std::vector<int64_t>& shape);

// One .safetensors file, header parsed and validated. Data is read on demand.
class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static SafetensorsFile open(const std::filesystem::path& path, uint32_t file_index = 0);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  const File& file() const { return file_; }
  const std::string& path() const { return file_.path(); }
  uint64_t data_start() const { return data_start_; }

 private:
  File file_;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

// A Hugging Face checkpoint: model.safetensors, or model.safetensors.index.json
// with shards, or a single *.safetensors file. All shards are opened and
// validated up front so a missing shard fails before any work is done.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::filesystem::path& dir);

  const std::vector<std::string>& names() const { return names_; }  // sorted
  const TensorInfo* find(const std::string& name) const;
  const TensorInfo& at(const std::string& name) const;  // throws naming the tensor
  // Renames every tensor whose name starts with `from` to start with `to`
  // instead (a multimodal checkpoint's "model.language_model." text weights
  // as "model."), for find(), at() and names(); TensorInfo::name keeps the
  // file's name. Fails if a renamed tensor collides with another.
  void rename_prefix(const std::string& from, const std::string& to);
  const SafetensorsFile& shard(uint32_t index) const { return shards_[index]; }
  size_t shard_count() const { return shards_.size(); }
  uint64_t total_bytes() const;

  // Reads a tensor's bytes (or a sub-range of them).
  void read(const TensorInfo& tensor, void* dst, uint64_t begin = 0, uint64_t length = ~0ull) const;

 private:
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, const TensorInfo*> by_name_;
  std::vector<std::string> names_;
};

// Declares a tensor for SafetensorsWriter.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;
};

// Writes one safetensors file whose tensors are declared up front and whose
// data is then streamed in declaration order (so huge files need little RAM).
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  // Appends bytes of the current tensor; moves to the next when one is full.
  void write(const void* data, size_t n);
  // Checks every declared byte was written, then syncs and closes.
  void finish();

  const std::vector<TensorSpec>& tensors() const { return tensors_; }

 private:
  File file_;
  std::vector<TensorSpec> tensors_;
  uint64_t expected_total_ = 0;
  uint64_t written_ = 0;
  uint64_t header_end_ = 0;
};

}  // namespace tern
