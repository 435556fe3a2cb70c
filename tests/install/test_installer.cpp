#include "tern/install/installer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/format/safetensors.h"
#include "tern/format/tern_model.h"
#include "tern/quant/quantize.h"

namespace tern {
namespace {

using testing::expect_error;
using testing::TempDir;

class InstallTest : public ::testing::Test {
 protected:
  void synth(DType dtype = DType::BF16, nlohmann::json overrides = nlohmann::json::object()) {
    auto o = testing::tiny_synth(dir / "hf", dtype);
    o.overrides = std::move(overrides);
    o.force = true;
    synthesize_model(o);
  }
  TempDir dir;
};

TEST_F(InstallTest, EveryTensorRoundTripsByteForByte) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    synth(dtype, {{"mlp_only_layers", {0}}, {"num_hidden_layers", 3}});
    auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
    opt.force = true;
    install_model(opt);
    auto ck = SafetensorsCheckpoint::open(dir / "hf");
    TernModel m = TernModel::open(dir / "m.tern");
    ASSERT_EQ(m.manifest().expert_layers.size(), 2u) << "layer 0 is dense";
    for (const auto& t : m.manifest().trunk) {
      const TensorInfo& src = ck.at(t.name);
      std::string a(src.nbytes, '\0'), b(t.size, '\0');
      ck.read(src, a.data());
      m.read_trunk(t, b.data());
      EXPECT_EQ(a, b) << t.name;
      EXPECT_EQ(t.offset % 64, 0u);
    }
    for (const auto& l : m.manifest().expert_layers) {
      EXPECT_EQ(l.offset % 4096, 0u);
      EXPECT_EQ(l.stride % 4096, 0u);
      for (int64_t e = 0; e < l.num_experts; ++e) {
        std::string rec(l.record_size, '\0');
        m.read_expert(l, e, rec.data());
        m.check_expert(l, e, rec.data());
        const char* proj[] = {"gate_proj", "up_proj", "down_proj"};
        for (size_t s = 0; s < 3; ++s) {
          const TensorInfo& src = ck.at(fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", l.layer, e, proj[s]));
          std::string a(src.nbytes, '\0');
          ck.read(src, a.data());
          EXPECT_EQ(a, rec.substr(l.sections[s].offset, l.sections[s].size)) << src.name;
        }
      }
    }
  }
}

TEST_F(InstallTest, RefusesToOverwriteWithoutForce) {
  synth();
  install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
  expect_error([&] { install_model(testing::quiet_install(dir / "hf", dir / "m.tern")); }, {"already exists", "--force"});
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.force = true;
  EXPECT_NO_THROW(install_model(opt));
  EXPECT_NO_THROW(TernModel::open(dir / "m.tern"));
}

TEST_F(InstallTest, FailedInstallLeavesNothingThatLooksComplete) {
  synth();
  // Drop one expert tensor from the checkpoint: the install must fail cleanly.
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  std::vector<TensorSpec> specs;
  for (const auto& name : ck.names())
    if (name != "model.layers.1.mlp.experts.5.up_proj.weight") specs.push_back({name, ck.at(name).dtype, ck.at(name).shape});
  {
    SafetensorsWriter w(dir / "hf" / "model.tmp", specs);
    for (const auto& s : specs) {
      std::string b(ck.at(s.name).nbytes, '\0');
      ck.read(ck.at(s.name), b.data());
      w.write(b.data(), b.size());
    }
    w.finish();
  }
  std::filesystem::rename(dir / "hf" / "model.tmp", dir / "hf" / "model.safetensors");
  expect_error([&] { install_model(testing::quiet_install(dir / "hf", dir / "m.tern")); },
               {"model.layers.1.mlp.experts.5.up_proj.weight", "missing"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tern"));
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".installing"), std::string::npos) << e.path();
}

TEST_F(InstallTest, ConfigThatDoesNotMatchTheWeightsIsAClearError) {
  synth();
  auto cfg = nlohmann::json::parse(testing::read_bytes(dir / "hf" / "config.json"));
  cfg["moe_intermediate_size"] = 48;
  testing::write_bytes(dir / "hf" / "config.json", cfg.dump());
  expect_error([&] { install_model(testing::quiet_install(dir / "hf", dir / "m.tern")); },
               {"gate_proj.weight", "has shape [32, 64]", "implies [48, 64]"});
}

TEST_F(InstallTest, UnsupportedArchitectureIsRejected) {
  synth();
  auto cfg = nlohmann::json::parse(testing::read_bytes(dir / "hf" / "config.json"));
  cfg["model_type"] = "mamba";
  testing::write_bytes(dir / "hf" / "config.json", cfg.dump());
  expect_error([&] { install_model(testing::quiet_install(dir / "hf", dir / "m.tern")); },
               {"unsupported architecture 'mamba'", "qwen3_moe"});
}

TEST_F(InstallTest, ConvertsExpertFormatOnRequest) {
  synth(DType::BF16);
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::F32;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  const ExpertLayer& l = m.manifest().expert_layers[0];
  EXPECT_EQ(l.sections[0].format, TensorFormat::F32);
  std::string rec(l.record_size, '\0');
  m.read_expert(l, 2, rec.data());
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  const TensorInfo& src = ck.at("model.layers.0.mlp.experts.2.gate_proj.weight");
  std::vector<uint16_t> bf(src.numel());
  ck.read(src, bf.data());
  for (size_t i = 0; i < bf.size(); ++i) {
    float v;
    std::memcpy(&v, rec.data() + i * 4, 4);
    ASSERT_EQ(v, bf16_to_f32(bf[i])) << i;
  }
  EXPECT_EQ(m.manifest().trunk[0].format, TensorFormat::BF16) << "trunk keeps its dtype";
}

TEST_F(InstallTest, RowsThatDoNotFitTheBlockSizeAreAClearError) {
  synth();  // tiny: rows of 64 and 32 elements
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::Q4_K;
  expect_error([&] { install_model(opt); }, {"experts.0.gate_proj.weight", "row length 64", "q4_k block size 256"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tern"));
}

TEST_F(InstallTest, FallbackPicksAFormatThatFits) {
  synth();
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::Q4_K;
  opt.trunk_format = TensorFormat::Q8_0;
  opt.expert_fallback = true;
  opt.trunk_fallback = true;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  EXPECT_EQ(m.manifest().expert_layers[0].sections[0].format, TensorFormat::Q4_0);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.self_attn.q_proj.weight").format, TensorFormat::Q8_0);
  EXPECT_EQ(m.trunk_tensor("model.norm.weight").format, TensorFormat::F32);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.mlp.gate.weight").format, TensorFormat::F32);
  EXPECT_TRUE(m.verify().ok());
}

TEST_F(InstallTest, QuantizedExpertsDequantizeCloseToTheSource) {
  synth(DType::F32);
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::Q8_0;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  const ExpertLayer& l = m.manifest().expert_layers[1];
  std::string rec(l.record_size, '\0');
  m.read_expert(l, 3, rec.data());
  const ExpertSection& down = l.sections[2];
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  const TensorInfo& src = ck.at("model.layers.1.mlp.experts.3.down_proj.weight");
  std::vector<float> want(src.numel()), got(src.numel());
  ck.read(src, want.data());
  dequantize_row(TensorFormat::Q8_0, rec.data() + down.offset, got.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 0.01f) << i;
}

}  // namespace
}  // namespace tern
