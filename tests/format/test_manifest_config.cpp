// TernModel::open checks that the manifest's config and its tensor table
// agree before anything is sized from either (issue 16: deleting head_dim
// from the config made the engine write past a buffer).
#include <gtest/gtest.h>

#include <functional>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/format/tern_model.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::TempDir;

class ManifestConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthesize_model(testing::tiny_synth(dir / "hf"));
    install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
    original = json::parse(testing::read_bytes(manifest_path()));
  }
  std::filesystem::path manifest_path() const { return dir / "m.tern" / "manifest.json"; }
  // Rewrites manifest.json from the installed one with `edit` applied.
  void edit(const std::function<void(json&)>& fn) {
    json j = original;
    fn(j);
    testing::write_bytes(manifest_path(), j.dump());
  }
  void expect_open_error(std::initializer_list<std::string> parts) {
    expect_error([&] { TernModel::open(dir / "m.tern"); }, parts);
  }
  json& trunk_tensor(json& j, const std::string& name) {
    for (json& t : j["trunk"]["tensors"])
      if (t["name"] == name) return t;
    throw std::runtime_error("no tensor " + name);
  }
  TempDir dir;
  json original;
};

TEST_F(ManifestConfigTest, InstalledManifestAgrees) {
  TernModel m = TernModel::open(dir / "m.tern");
  EXPECT_NO_THROW(check_manifest_against_config(m.manifest(), m.config(), "manifest.json"));
}

// Issue 16, reproduction 1: head_dim deleted from the manifest's config. The
// config then implies head_dim = hidden / heads = 16, not the 32 the tensors have.
TEST_F(ManifestConfigTest, ConfigWithoutHeadDimIsRefusedNamingFileAndTensor) {
  edit([](json& j) { j["config"].erase("head_dim"); });
  expect_open_error({"manifest.json", "trunk tensor \"model.layers.0.self_attn.q_proj.weight\"", "has shape [128, 64]",
                     "config implies [64, 64] = [num_attention_heads x head_dim, hidden_size]", "disagree"});
}

TEST_F(ManifestConfigTest, ConfigCountsThatDisagreeWithTheTableAreRefused) {
  edit([](json& j) { j["config"]["vocab_size"] = 5000; });
  expect_open_error({"model.embed_tokens.weight", "config implies [5000, 64]"});
  edit([](json& j) { j["config"]["num_hidden_layers"] = 3; });
  expect_open_error({"manifest.json", "trunk tensor \"model.layers.2.input_layernorm.weight\" is missing"});
  edit([](json& j) { j["config"]["num_hidden_layers"] = 1; });
  expect_open_error({"trunk tensor \"model.layers.1.", "is not a tensor of qwen3_moe"});
  edit([](json& j) { j["config"]["num_experts"] = 16; });
  expect_open_error({"mlp.gate.weight", "config implies [16, 64]"});
  edit([](json& j) { j["config"]["moe_intermediate_size"] = 64; });
  expect_open_error({"expert layer 0 section 'gate'", "has shape [32, 64]", "config implies [64, 64]"});
  edit([](json& j) { j["config"]["mlp_only_layers"] = {1}; });
  expect_open_error({"model.layers.1.mlp.gate.weight", "is not a tensor"});
  // Far more records than the table lists: refused before any is declared.
  edit([](json& j) {
    j["config"]["num_hidden_layers"] = 1024;
    j["config"]["num_experts"] = 256;
  });
  expect_open_error({"the config implies 262144 expert records", "the expert table lists 16"});
}

TEST_F(ManifestConfigTest, TrunkShapeChangedWithItsSizeIsRefused) {
  // Shape and size consistent with each other, but not with the config.
  edit([&](json& j) {
    json& t = trunk_tensor(j, "model.norm.weight");
    t["shape"] = {32};
    t["size"] = t["size"].get<uint64_t>() / 2;
  });
  expect_open_error({"trunk tensor \"model.norm.weight\" has shape [32]", "config implies [64]"});
}

TEST_F(ManifestConfigTest, FormatMustSuitTheTensorsRole) {
  edit([&](json& j) {
    json& t = trunk_tensor(j, "model.norm.weight");
    t["format"] = "u8";
    t["size"] = 64;
  });
  expect_open_error({"model.norm.weight", "format u8 cannot hold a 1-D tensor"});
  edit([&](json& j) {
    json& t = trunk_tensor(j, "model.layers.0.self_attn.q_proj.weight");
    t["format"] = "i8";
    t["size"] = 128 * 64;
  });
  expect_open_error({"q_proj.weight", "format i8 cannot hold a weight matrix"});
}

TEST_F(ManifestConfigTest, OverlappingTrunkTensorsAreRefused) {
  edit([&](json& j) {
    json& a = j["trunk"]["tensors"][1];
    json& b = j["trunk"]["tensors"][2];
    b["offset"] = a["offset"];
  });
  expect_open_error({"manifest.json", "overlap"});
}

TEST_F(ManifestConfigTest, ExpertRecordsMustBeTheDeclaredSectionsBackToBack) {
  edit([](json& j) { j["experts"]["layers"][0]["sections"].erase(2); });
  expect_open_error({"expert layer 0 has 2 sections", "gate, up, down"});
  edit([](json& j) {
    json& sections = j["experts"]["layers"][0]["sections"];
    sections[0]["name"] = "up";
    sections[1]["name"] = "gate";
  });
  expect_open_error({"expert layer 0 section 0 is \"up\", expected 'gate'"});
  edit([](json& j) {
    json& s = j["experts"]["layers"][1]["sections"][2];
    s["offset"] = s["offset"].get<uint64_t>() - 2;
  });
  expect_open_error({"expert layer 1 section down", "overlaps"});
  // A record larger than its sections (stride grown so the record still fits).
  edit([](json& j) {
    json& l = j["experts"]["layers"][0];
    l["record_size"] = l["record_size"].get<uint64_t>() + 2;
    l["stride"] = round_up(l["record_size"].get<uint64_t>(), kExpertAlignment);
  });
  expect_open_error({"expert layer 0", "record_size", "sections' total"});
}

TEST_F(ManifestConfigTest, ExpertStrideMustBeTheRecordRoundedUp) {
  edit([](json& j) {
    json& l = j["experts"]["layers"][0];
    l["stride"] = l["stride"].get<uint64_t>() + kExpertAlignment;
  });
  expect_open_error({"expert layer 0", "stride", "rounded up to 4096"});
}

TEST_F(ManifestConfigTest, ExpertLayersMustBeTheConfigsMoeLayers) {
  edit([](json& j) { j["experts"]["layers"].erase(1); });
  expect_open_error({"layer 1 is a MoE layer in the config but has no expert records"});
  edit([](json& j) { j["experts"]["layers"][1]["layer"] = 5; });
  expect_open_error({"expert layer 5 is not a MoE layer"});
  edit([](json& j) {
    json& l = j["experts"]["layers"][1];
    l["num_experts"] = 4;
    l["xxh3"] = json(std::vector<json>(l["xxh3"].begin(), l["xxh3"].begin() + 4));
  });
  expect_open_error({"expert layer 1 has 4 experts but the config says num_experts = 8"});
  edit([](json& j) { j["architecture"] = "mixtral"; });
  expect_open_error({"field 'architecture' is \"mixtral\"", "qwen3_moe"});
}

TEST_F(ManifestConfigTest, FileNamesStayInsideTheModelDirectory) {
  edit([](json& j) { j["trunk"]["file"] = "../hf/model.safetensors"; });
  expect_open_error({"manifest.json trunk", "invalid file name", "inside the model directory"});
  edit([](json& j) { j["experts"]["file"] = "/etc/passwd"; });
  expect_open_error({"manifest.json experts", "invalid file name"});
}

TEST_F(ManifestConfigTest, MalformedFieldsNameTheManifest) {
  edit([](json& j) { j["created_by"] = 7; });
  EXPECT_NO_THROW(TernModel::open(dir / "m.tern")) << "created_by is informational";
  edit([](json& j) { j["trunk"]["tensors"][0]["name"] = 7; });
  expect_open_error({"manifest.json trunk tensor ?", "'name' must be a string"});
  edit([](json& j) { j["trunk"]["tensors"][0]["xxh3"] = "xyz"; });
  expect_open_error({"manifest.json trunk tensor model.embed_tokens.weight", "'xxh3'", "16 hex digits"});
  edit([](json& j) { j["trunk"]["tensors"][0]["shape"] = {18446744073709551615ull, 1}; });
  expect_open_error({"manifest.json trunk tensor model.embed_tokens.weight", "list of sizes"});
  edit([](json& j) { j["version"] = 4294967297ull; });
  expect_open_error({"version 4294967297", "not supported"});
}

}  // namespace
}  // namespace tern
