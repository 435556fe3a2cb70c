#include "tern/synth/synth.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/format/model_config.h"
#include "tern/format/safetensors.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

using testing::expect_error;
using testing::TempDir;

TEST(Synth, WritesTheHuggingFaceLayout) {
  TempDir dir;
  synthesize_model(testing::tiny_synth(dir / "m"));
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / "m" / f)) << f;
  ModelConfig c = load_model_config(dir / "m");
  EXPECT_EQ(c.architecture, "qwen3_moe");
  Tokenizer tok = Tokenizer::load(dir / "m" / "tokenizer.json");
  EXPECT_GE(c.vocab_size, tok.vocab_size());
  auto tc = nlohmann::json::parse(testing::read_bytes(dir / "m" / "tokenizer_config.json"));
  EXPECT_TRUE(tc.contains("chat_template"));
}

TEST(Synth, IsDeterministicForASeed) {
  TempDir dir;
  synthesize_model(testing::tiny_synth(dir / "a", DType::BF16, 3));
  synthesize_model(testing::tiny_synth(dir / "b", DType::BF16, 3));
  synthesize_model(testing::tiny_synth(dir / "c", DType::BF16, 4));
  auto a = testing::read_bytes(dir / "a" / "model.safetensors");
  EXPECT_EQ(a, testing::read_bytes(dir / "b" / "model.safetensors"));
  EXPECT_NE(a, testing::read_bytes(dir / "c" / "model.safetensors"));
}

TEST(Synth, ShardedOutputHasAnIndexAndTheSameTensors) {
  TempDir dir;
  synthesize_model(testing::tiny_synth(dir / "one"));
  auto o = testing::tiny_synth(dir / "many");
  o.shard_bytes = 64 * 1024;
  SynthResult r = synthesize_model(o);
  EXPECT_GT(r.num_shards, 3u);
  EXPECT_TRUE(std::filesystem::exists(dir / "many" / "model.safetensors.index.json"));
  auto one = SafetensorsCheckpoint::open(dir / "one");
  auto many = SafetensorsCheckpoint::open(dir / "many");
  EXPECT_EQ(one.names(), many.names());
  EXPECT_EQ(many.shard_count(), r.num_shards);
  for (const auto& n : one.names()) {
    std::string a(one.at(n).nbytes, '\0'), b(many.at(n).nbytes, '\0');
    one.read(one.at(n), a.data());
    many.read(many.at(n), b.data());
    ASSERT_EQ(a, b) << n << ": values depend only on seed and name";
  }
}

TEST(Synth, WeightsAreFiniteAndScaledByFanIn) {
  TempDir dir;
  auto o = testing::tiny_synth(dir / "m", DType::F32);
  synthesize_model(o);
  auto ck = SafetensorsCheckpoint::open(dir / "m");
  std::vector<float> v(ck.at("model.layers.0.mlp.experts.0.down_proj.weight").numel());
  ck.read(ck.at("model.layers.0.mlp.experts.0.down_proj.weight"), v.data());
  double sum2 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum2 += static_cast<double>(x) * x;
  }
  double std = std::sqrt(sum2 / static_cast<double>(v.size()));
  EXPECT_NEAR(std, 1.0 / std::sqrt(32.0), 0.02) << "down_proj fan_in is moe_intermediate_size";
  std::vector<float> norm(64);
  ck.read(ck.at("model.norm.weight"), norm.data());
  for (float x : norm) EXPECT_NEAR(x, 1.0f, 0.26f);
}

TEST(Synth, OverridesAndRealTokenizerAreUsed) {
  TempDir dir;
  synthesize_model(testing::tiny_synth(dir / "a"));
  auto o = testing::tiny_synth(dir / "b");
  o.tokenizer = dir / "a" / "tokenizer.json";
  o.overrides = {{"num_hidden_layers", 3}, {"num_experts", 4}, {"tie_word_embeddings", true}};
  synthesize_model(o);
  ModelConfig c = load_model_config(dir / "b");
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(testing::read_bytes(dir / "a" / "tokenizer.json"), testing::read_bytes(dir / "b" / "tokenizer.json"));
  auto ck = SafetensorsCheckpoint::open(dir / "b");
  EXPECT_EQ(ck.find("lm_head.weight"), nullptr);
}

TEST(Synth, BadRequestsAreClearErrors) {
  TempDir dir;
  auto o = testing::tiny_synth(dir / "m");
  o.preset = "huge";
  expect_error([&] { synthesize_model(o); }, {"unknown preset 'huge'", "tiny"});
  o = testing::tiny_synth(dir / "m");
  o.architecture = "nope";
  expect_error([&] { synthesize_model(o); }, {"unsupported architecture 'nope'"});
  o = testing::tiny_synth(dir / "m");
  o.overrides = {{"vocab_size", 10}};
  expect_error([&] { synthesize_model(o); }, {"vocab_size 10", "tokenizer"});
  o = testing::tiny_synth(dir / "m");
  o.overrides = {{"num_experts_per_tok", 99}};
  expect_error([&] { synthesize_model(o); }, {"num_experts_per_tok"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m"));
  synthesize_model(testing::tiny_synth(dir / "m"));
  expect_error([&] { synthesize_model(testing::tiny_synth(dir / "m")); }, {"already exists", "--force"});
}

}  // namespace
}  // namespace tern
