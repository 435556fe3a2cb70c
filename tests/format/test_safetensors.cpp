#include "tern/format/safetensors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "tern/core/error.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::TempDir;

using testing::expect_error;

TEST(SafetensorsWriter, RoundTripsThroughReader) {
  TempDir dir;
  std::vector<TensorSpec> specs = {{"a", DType::F32, {2, 3}}, {"b", DType::BF16, {4}}, {"c", DType::U8, {5}}};
  SafetensorsWriter w(dir / "model.safetensors", specs);
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  uint16_t b[4] = {1, 2, 3, 4};
  uint8_t c[5] = {9, 8, 7, 6, 5};
  w.write(a.data(), 24);
  w.write(b, 8);
  w.write(c, 5);
  w.finish();

  auto ck = SafetensorsCheckpoint::open(dir.path());
  ASSERT_EQ(ck.names().size(), 3u);
  const TensorInfo& ta = ck.at("a");
  EXPECT_EQ(ta.dtype, DType::F32);
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta.offset % 8, 0u) << "data section must start 8-byte aligned";
  std::vector<float> got(6);
  ck.read(ta, got.data());
  EXPECT_EQ(got, a);
  uint8_t gc[5];
  ck.read(ck.at("c"), gc);
  EXPECT_EQ(gc[0], 9);
  EXPECT_EQ(gc[4], 5);
  float part[2];
  ck.read(ta, part, 8, 8);
  EXPECT_EQ(part[0], 3);
  EXPECT_EQ(part[1], 4);
}

TEST(SafetensorsWriter, RejectsWrongByteCount) {
  TempDir dir;
  SafetensorsWriter w(dir / "x.safetensors", {{"a", DType::F32, {2}}});
  float v = 1;
  w.write(&v, 4);
  EXPECT_THROW(w.finish(), Error);
}

TEST(SafetensorsFile, ReadsAllSupportedDtypes) {
  TempDir dir;
  json h = {{"f32", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
            {"f16", {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {4, 6}}}},
            {"bf16", {{"dtype", "BF16"}, {"shape", {1}}, {"data_offsets", {6, 8}}}},
            {"u8", {{"dtype", "U8"}, {"shape", {2, 1}}, {"data_offsets", {8, 10}}}},
            {"i8", {{"dtype", "I8"}, {"shape", {2}}, {"data_offsets", {10, 12}}}},
            {"__metadata__", {{"format", "pt"}}}};
  testing::write_safetensors_raw(dir / "m.safetensors", h.dump(), std::string(12, '\1'));
  auto f = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.find("u8")->dtype, DType::U8);
  EXPECT_EQ(f.find("i8")->dtype, DType::I8);
  EXPECT_EQ(f.find("bf16")->nbytes, 2u);
}

TEST(SafetensorsFile, RejectsTooShortFile) {
  TempDir dir;
  testing::write_bytes(dir / "m.safetensors", "abc");
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"m.safetensors", "too short"});
}

TEST(SafetensorsFile, RejectsHeaderLengthBeyondFile) {
  TempDir dir;
  testing::write_safetensors_raw(dir / "m.safetensors", "{}", "", 5000);
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"m.safetensors", "past the end"});
}

TEST(SafetensorsFile, RejectsHugeHeaderLength) {
  TempDir dir;
  testing::write_safetensors_raw(dir / "m.safetensors", "{}", "", 200ull << 20);
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"exceeds", "limit"});
}

TEST(SafetensorsFile, RejectsInvalidJson) {
  TempDir dir;
  testing::write_safetensors_raw(dir / "m.safetensors", "{\"a\": [", "");
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"m.safetensors", "not valid JSON"});
}

TEST(SafetensorsFile, RejectsUnknownDtype) {
  TempDir dir;
  json h = {{"w", {{"dtype", "Q9"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}};
  testing::write_safetensors_raw(dir / "m.safetensors", h.dump(), "x");
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"'w'", "unknown dtype 'Q9'"});
}

TEST(SafetensorsFile, RejectsShapeSizeMismatch) {
  TempDir dir;
  json h = {{"w", {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 12}}}}};
  testing::write_safetensors_raw(dir / "m.safetensors", h.dump(), std::string(12, '\0'));
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"'w'", "needs 16 bytes", "give 12"});
}

TEST(SafetensorsFile, RejectsRangeOutsideFile) {
  TempDir dir;
  json h = {{"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  testing::write_safetensors_raw(dir / "m.safetensors", h.dump(), std::string(8, '\0'));
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"'w'", "outside"});
}

TEST(SafetensorsFile, RejectsOverlappingRanges) {
  TempDir dir;
  json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
            {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  testing::write_safetensors_raw(dir / "m.safetensors", h.dump(), std::string(12, '\0'));
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"'a'", "'b'", "overlapping"});
}

TEST(SafetensorsFile, RejectsDuplicateNames) {
  TempDir dir;
  std::string h =
      R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
      R"( "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})";
  testing::write_safetensors_raw(dir / "m.safetensors", h, "xy");
  expect_error([&] { SafetensorsFile::open(dir / "m.safetensors"); }, {"duplicate tensor name 'a'"});
}

TEST(SafetensorsFile, RejectsBadOffsetsAndShapes) {
  TempDir dir;
  for (std::string bad : {R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}})",
                          R"({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})",
                          R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})",
                          R"({"a": {"dtype": "U8", "data_offsets": [0, 1]}})", R"([1, 2])"}) {
    testing::write_safetensors_raw(dir / "m.safetensors", bad, "xy");
    EXPECT_THROW(SafetensorsFile::open(dir / "m.safetensors"), Error) << bad;
  }
}

TEST(SafetensorsFile, TruncatedDataIsDetectedAtOpen) {
  TempDir dir;
  SafetensorsWriter w(dir / "model.safetensors", {{"a", DType::F32, {1024}}});
  std::vector<float> v(1024, 1.0f);
  w.write(v.data(), 4096);
  w.finish();
  std::string bytes = testing::read_bytes(dir / "model.safetensors");
  testing::write_bytes(dir / "model.safetensors", bytes.substr(0, bytes.size() - 100));
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"'a'", "truncated"});
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int s = 0; s < 2; ++s) {
      std::string name = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
      SafetensorsWriter w(dir / name, {{"t" + std::to_string(s), DType::F32, {2}}});
      float v[2] = {static_cast<float>(s), 1};
      w.write(v, 8);
      w.finish();
    }
    index = {{"metadata", {{"total_size", 16}}},
             {"weight_map", {{"t0", "model-00001-of-00002.safetensors"}, {"t1", "model-00002-of-00002.safetensors"}}}};
  }
  void write_index() { testing::write_bytes(dir / "model.safetensors.index.json", index.dump()); }
  TempDir dir;
  json index;
};

TEST_F(ShardedCheckpoint, OpensAllShards) {
  write_index();
  auto ck = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(ck.shard_count(), 2u);
  float v[2];
  ck.read(ck.at("t1"), v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(ck.total_bytes(), 16u);
}

TEST_F(ShardedCheckpoint, MissingShardIsNamed) {
  index["weight_map"]["t2"] = "model-00003-of-00003.safetensors";
  write_index();
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"missing shard", "model-00003-of-00003"});
}

// Found by the fuzzer (issue 16): a shard name the file system refuses
// (ENAMETOOLONG) made std::filesystem throw past tern::Error.
TEST_F(ShardedCheckpoint, ShardNamesTheFileSystemRefusesAreCleanErrors) {
  index["weight_map"]["t2"] = std::string(300, 'x') + ".safetensors";
  write_index();
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"missing shard", "File name too long"});
  for (const std::string bad : {".", "a\nb", "../model.safetensors"}) {
    index["weight_map"]["t2"] = bad;
    write_index();
    expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"invalid shard"});
  }
}

TEST_F(ShardedCheckpoint, TensorNamedInIndexButAbsent) {
  index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
  write_index();
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"'ghost'", "does not contain"});
}

TEST_F(ShardedCheckpoint, InvalidIndexJson) {
  testing::write_bytes(dir / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"index.json", "invalid JSON"});
}

TEST(SafetensorsCheckpoint, EmptyDirectoryIsAClearError) {
  TempDir dir;
  expect_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"no model.safetensors"});
}

}  // namespace
}  // namespace tern
