#include "tern/format/tern_model.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/models.h"

namespace tern {
namespace {

using testing::expect_error;
using testing::TempDir;

class TernModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthesize_model(testing::tiny_synth(dir / "hf"));
    install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
  }
  TempDir dir;
};

TEST_F(TernModelTest, CleanModelVerifies) {
  TernModel m = TernModel::open(dir / "m.tern");
  uint64_t seen = 0;
  VerifyReport r = m.verify([&](uint64_t n) { seen += n; });
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.experts, 16u);
  EXPECT_GT(r.trunk_tensors, 10u);
  EXPECT_EQ(seen, m.verify_total_bytes());
}

TEST_F(TernModelTest, VerifyNamesCorruptedExpertAndOffset) {
  uint64_t offset;
  {
    TernModel m = TernModel::open(dir / "m.tern");
    offset = m.manifest().expert_layers[1].expert_offset(3);
  }
  testing::corrupt_byte(dir / "m.tern" / "experts.bin", offset + 100);
  TernModel m = TernModel::open(dir / "m.tern");
  VerifyReport r = m.verify();
  ASSERT_EQ(r.issues.size(), 1u);
  std::string msg = r.issues[0].message();
  EXPECT_NE(msg.find("expert (layer 1, expert 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset " + std::to_string(offset)), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
}

TEST_F(TernModelTest, FirstUseOfCorruptedExpertFailsNamingIt) {
  TernModel clean = TernModel::open(dir / "m.tern");
  const ExpertLayer& l = clean.manifest().expert_layers[0];
  testing::corrupt_byte(dir / "m.tern" / "experts.bin", l.expert_offset(6) + l.record_size - 1);
  TernModel m = TernModel::open(dir / "m.tern");
  const ExpertLayer& layer = m.manifest().expert_layers[0];
  std::string rec(layer.record_size, '\0');
  m.read_expert(layer, 5, rec.data());
  EXPECT_NO_THROW(m.check_expert(layer, 5, rec.data()));
  m.read_expert(layer, 6, rec.data());
  expect_error([&] { m.check_expert(layer, 6, rec.data()); }, {"expert (layer 0, expert 6)", "checksum mismatch"});
}

TEST_F(TernModelTest, CorruptedTrunkTensorIsNamed) {
  std::string name;
  uint64_t offset;
  {
    TernModel m = TernModel::open(dir / "m.tern");
    name = m.manifest().trunk[2].name;
    offset = m.manifest().trunk[2].offset;
  }
  testing::corrupt_byte(dir / "m.tern" / "trunk.bin", offset);
  TernModel m = TernModel::open(dir / "m.tern");
  VerifyReport r = m.verify();
  ASSERT_EQ(r.issues.size(), 1u);
  EXPECT_NE(r.issues[0].message().find("'" + name + "'"), std::string::npos);
  std::string buf(m.manifest().trunk[2].size, '\0');
  expect_error([&] { m.read_trunk(m.manifest().trunk[2], buf.data()); }, {name, "checksum mismatch"});
}

TEST_F(TernModelTest, CorruptedTokenizerFileIsReported) {
  testing::corrupt_byte(dir / "m.tern" / "tokenizer.json", 10);
  VerifyReport r = TernModel::open(dir / "m.tern").verify();
  ASSERT_EQ(r.issues.size(), 1u);
  EXPECT_NE(r.issues[0].message().find("tokenizer.json"), std::string::npos);
}

TEST_F(TernModelTest, TruncatedExpertsFileFailsAtOpen) {
  std::filesystem::resize_file(dir / "m.tern" / "experts.bin", 4096);
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"experts.bin", "truncated"});
}

TEST_F(TernModelTest, MissingManifestMeansIncompleteInstall) {
  std::filesystem::remove(dir / "m.tern" / "manifest.json");
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"no manifest.json", "install"});
}

TEST_F(TernModelTest, ManifestWithOutOfRangeOffsetIsRejected) {
  auto path = dir / "m.tern" / "manifest.json";
  auto j = nlohmann::json::parse(testing::read_bytes(path));
  j["experts"]["layers"][1]["offset"] = j["experts"]["size"].get<uint64_t>();
  testing::write_bytes(path, j.dump());
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"expert layer 1", "outside"});
  j["experts"]["layers"][1]["offset"] = 4097;
  testing::write_bytes(path, j.dump());
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"aligned"});
}

TEST_F(TernModelTest, NewerManifestVersionIsRejected) {
  auto path = dir / "m.tern" / "manifest.json";
  auto j = nlohmann::json::parse(testing::read_bytes(path));
  j["version"] = 99;
  testing::write_bytes(path, j.dump());
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"version 99", "not supported"});
  testing::write_bytes(path, "{\"format\": ");
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"manifest.json", "invalid JSON"});
}

TEST_F(TernModelTest, SummaryCountsActiveParameters) {
  TernModel m = TernModel::open(dir / "m.tern");
  ModelSummary s = m.summary();
  const ModelConfig& c = m.config();
  uint64_t per_expert = 3u * static_cast<uint64_t>(c.moe_intermediate_size * c.hidden_size);
  EXPECT_EQ(s.expert_params, per_expert * 8 * 2);
  EXPECT_EQ(s.active_params, s.trunk_params + per_expert * 2 * 2);
  EXPECT_EQ(s.expert_bytes_per_token, per_expert * 2 /*bf16*/ * 2 /*top-k*/ * 2 /*layers*/);
}

}  // namespace
}  // namespace tern
