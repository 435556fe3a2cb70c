// tern synth --arch gpt_oss: the released MXFP4 layout and the dequantized
// float layout, config.json / generation_config.json / tokenizer as released.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"
#include "tern/format/safetensors.h"
#include "tern/synth/random_weights.h"
#include "tern/synth/synth.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::TempDir;

SynthOptions gpt_oss(const std::filesystem::path& out, const std::string& layout = "", DType dtype = DType::BF16,
                     uint64_t seed = 3, const std::string& preset = "tiny") {
  SynthOptions o;
  o.architecture = "gpt_oss";
  o.preset = preset;
  o.layout = layout;
  o.output = out;
  o.dtype = dtype;
  o.seed = seed;
  o.quiet = true;
  return o;
}

std::string bytes_of(const SafetensorsCheckpoint& ck, const std::string& name) {
  std::string b(ck.at(name).nbytes, '\0');
  ck.read(ck.at(name), b.data());
  return b;
}

TEST(SynthGptOss, TinyWritesTheReleasedMxfp4Layout) {
  TempDir dir;
  SynthResult r = synthesize_model(gpt_oss(dir / "m"));
  EXPECT_EQ(r.config["tern_synthetic"]["layout"], "mxfp4");
  const json config = json::parse(testing::read_bytes(dir / "m" / "config.json"));
  EXPECT_EQ(config["model_type"], "gpt_oss");
  EXPECT_EQ(config["quantization_config"]["quant_method"], "mxfp4");
  EXPECT_EQ(config["quantization_config"]["modules_to_not_convert"].size(), 4u);
  EXPECT_EQ(config["layer_types"],
            json({"sliding_attention", "full_attention", "sliding_attention", "full_attention"}));
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(config["rope_scaling"]["truncate"], false);
  EXPECT_EQ(config["experts_per_token"], config["num_experts_per_tok"]);
  ModelConfig c = load_model_config(dir / "m");
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.hidden_size % 32, 0);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_TRUE(c.layer_is_sliding(0));
  EXPECT_FALSE(c.layer_is_sliding(3));
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.rope_scaling->truncate);

  auto ck = SafetensorsCheckpoint::open(dir / "m");
  const TensorInfo& blocks = ck.at("model.layers.1.mlp.experts.gate_up_proj_blocks");
  EXPECT_EQ(blocks.dtype, DType::U8);
  EXPECT_EQ(blocks.shape, (std::vector<int64_t>{8, 128, 2, 16}));
  EXPECT_EQ(ck.at("model.layers.1.mlp.experts.down_proj_scales").dtype, DType::U8);
  EXPECT_EQ(ck.at("model.layers.1.mlp.experts.down_proj_scales").shape, (std::vector<int64_t>{8, 64, 2}));
  EXPECT_EQ(ck.at("model.layers.1.mlp.experts.down_proj_bias").dtype, DType::BF16);
  EXPECT_EQ(ck.at("model.layers.1.self_attn.sinks").shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(ck.find("model.layers.1.mlp.experts.gate_up_proj"), nullptr);

  // Tokenizer: the synthetic BPE with the harmony specials; ids in the configs.
  Tokenizer tok = Tokenizer::load(dir / "m" / "tokenizer.json");
  EXPECT_EQ(c.vocab_size, tok.vocab_size());
  for (const char* piece : {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>",
                            "<|constrain|>", "<|endoftext|>", "<|startoftext|>"}) {
    const int32_t id = tok.token_id(piece);
    ASSERT_GE(id, 0) << piece;
    EXPECT_TRUE(tok.is_special(id)) << piece;
  }
  const json gen = json::parse(testing::read_bytes(dir / "m" / "generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"],
            json({tok.token_id("<|return|>"), tok.token_id("<|endoftext|>"), tok.token_id("<|call|>")}));
  EXPECT_EQ(gen["bos_token_id"], tok.token_id("<|startoftext|>"));
  EXPECT_EQ(gen["pad_token_id"], tok.token_id("<|endoftext|>"));
  EXPECT_EQ(config["eos_token_id"], tok.token_id("<|return|>"));
  EXPECT_EQ(config["pad_token_id"], tok.token_id("<|endoftext|>"));
  const json tc = json::parse(testing::read_bytes(dir / "m" / "tokenizer_config.json"));
  EXPECT_EQ(tc["eos_token"], "<|return|>");
  EXPECT_EQ(tc["bos_token"], "<|startoftext|>");
  EXPECT_FALSE(tc.contains("chat_template"));
}

TEST(SynthGptOss, HarmonySpecialsKeepTheRealRelativeIds) {
  SyntheticTokenizerOptions o;
  o.specials = SyntheticSpecials::Harmony;
  SyntheticTokenizer t = build_synthetic_tokenizer(o);
  TempDir dir;
  testing::write_bytes(dir / "tokenizer.json", t.tokenizer_json);
  Tokenizer tok = Tokenizer::load(dir / "tokenizer.json");
  const int32_t base = tok.token_id("<|startoftext|>");  // 199998 in o200k_harmony
  EXPECT_EQ(tok.token_id("<|endoftext|>"), base + 1);
  EXPECT_EQ(tok.token_id("<|return|>"), base + 4);
  EXPECT_EQ(tok.token_id("<|constrain|>"), base + 5);
  EXPECT_EQ(tok.token_id("<|channel|>"), base + 7);
  EXPECT_EQ(tok.token_id("<|start|>"), base + 8);
  EXPECT_EQ(tok.token_id("<|end|>"), base + 9);
  EXPECT_EQ(tok.token_id("<|message|>"), base + 10);
  EXPECT_EQ(tok.token_id("<|call|>"), base + 14);
  EXPECT_EQ(tok.token_id("<|endofprompt|>"), base + 20);
  EXPECT_EQ(tok.token_id("<|reserved_200000|>"), base + 2);
  EXPECT_EQ(t.vocab_size, base + 21);
  EXPECT_EQ(t.eos_id, base + 4);
  EXPECT_EQ(t.pad_id, base + 1);
  // Specials are cut out of text; ordinary text round-trips.
  const auto ids = tok.encode("<|start|>user<|message|>Hello, world!<|end|>");
  EXPECT_EQ(ids.front(), base + 8);
  EXPECT_EQ(ids.back(), base + 9);
  EXPECT_EQ(tok.decode(ids), "<|start|>user<|message|>Hello, world!<|end|>");
  // The Qwen3 flavour is unchanged by the option.
  SyntheticTokenizer q = build_synthetic_tokenizer();
  EXPECT_NE(q.tokenizer_json.find("<|im_end|>"), std::string::npos);
  EXPECT_EQ(q.tokenizer_json.find("<|return|>"), std::string::npos);
}

TEST(SynthGptOss, FloatLayoutHoldsExactlyTheDequantizedMxfp4Values) {
  TempDir dir;
  synthesize_model(gpt_oss(dir / "mx", "mxfp4", DType::F32, 9));
  synthesize_model(gpt_oss(dir / "fl", "float", DType::F32, 9));
  const json fl_config = json::parse(testing::read_bytes(dir / "fl" / "config.json"));
  EXPECT_FALSE(fl_config.contains("quantization_config")) << "only the MXFP4 layout has one";
  auto mx = SafetensorsCheckpoint::open(dir / "mx");
  auto fl = SafetensorsCheckpoint::open(dir / "fl");
  // Every tensor both layouts have is identical.
  size_t shared = 0;
  for (const auto& name : mx.names())
    if (fl.find(name)) {
      EXPECT_EQ(bytes_of(mx, name), bytes_of(fl, name)) << name;
      ++shared;
    }
  EXPECT_EQ(shared, mx.names().size() - 4 * 4) << "all but the 4 MXFP4 tensors of 4 layers";
  for (int layer : {0, 3}) {
    for (const char* proj : {"gate_up_proj", "down_proj"}) {
      const std::string p = fmt::format("model.layers.{}.mlp.experts.{}", layer, proj);
      const std::string blocks = bytes_of(mx, p + "_blocks"), scales = bytes_of(mx, p + "_scales");
      const TensorInfo& f = fl.at(p);  // [E, in, out]
      std::vector<float> values(f.numel());
      fl.read(f, values.data());
      const int64_t E = f.shape[0], in = f.shape[1], out = f.shape[2], groups = in / 32;
      EXPECT_EQ(mx.at(p + "_blocks").shape, (std::vector<int64_t>{E, out, groups, 16}));
      std::vector<float> row(static_cast<size_t>(in));
      for (int64_t e = 0; e < E; ++e)
        for (int64_t o = 0; o < out; ++o) {
          const int64_t at = (e * out + o) * groups;
          dequantize_hf_mxfp4(reinterpret_cast<const uint8_t*>(blocks.data()) + at * 16,
                              reinterpret_cast<const uint8_t*>(scales.data()) + at, groups, row.data());
          for (int64_t i = 0; i < in; ++i)
            ASSERT_EQ(values[static_cast<size_t>((e * in + i) * out + o)], row[static_cast<size_t>(i)])
                << p << " e" << e << " o" << o << " i" << i;
        }
    }
  }
}

TEST(SynthGptOss, Mxfp4WeightsHaveTheStdOfOtherProjections) {
  TempDir dir;
  synthesize_model(gpt_oss(dir / "m"));
  auto ck = SafetensorsCheckpoint::open(dir / "m");
  const std::string blocks = bytes_of(ck, "model.layers.0.mlp.experts.down_proj_blocks");
  const std::string scales = bytes_of(ck, "model.layers.0.mlp.experts.down_proj_scales");
  const int64_t groups = static_cast<int64_t>(scales.size());
  std::vector<float> v(static_cast<size_t>(groups * 32));
  dequantize_hf_mxfp4(reinterpret_cast<const uint8_t*>(blocks.data()), reinterpret_cast<const uint8_t*>(scales.data()),
                      groups, v.data());
  double sum2 = 0;
  for (float x : v) sum2 += double(x) * x;
  const double std = std::sqrt(sum2 / static_cast<double>(v.size()));
  const double want = 1.0 / std::sqrt(64.0);  // fan_in = intermediate_size
  EXPECT_GT(std, want / 1.5);
  EXPECT_LT(std, want * 1.5);
  for (char s : scales) EXPECT_NE(static_cast<uint8_t>(s), 255);
  // Sinks are logits of std ~1.
  const TensorInfo& sinks = ck.at("model.layers.0.self_attn.sinks");
  EXPECT_EQ(sinks.dtype, DType::BF16);
}

TEST(SynthGptOss, IsDeterministicForASeed) {
  TempDir dir;
  synthesize_model(gpt_oss(dir / "a", "", DType::BF16, 3));
  synthesize_model(gpt_oss(dir / "b", "", DType::BF16, 3));
  synthesize_model(gpt_oss(dir / "c", "", DType::BF16, 4));
  const std::string a = testing::read_bytes(dir / "a" / "model.safetensors");
  EXPECT_EQ(a, testing::read_bytes(dir / "b" / "model.safetensors"));
  EXPECT_NE(a, testing::read_bytes(dir / "c" / "model.safetensors"));
  // Sharding changes nothing but the files.
  auto o = gpt_oss(dir / "d", "", DType::BF16, 3);
  o.shard_bytes = 100 * 1024;
  EXPECT_GT(synthesize_model(o).num_shards, 2u);
  auto one = SafetensorsCheckpoint::open(dir / "a"), many = SafetensorsCheckpoint::open(dir / "d");
  EXPECT_EQ(one.names(), many.names());
  for (const auto& n : one.names()) ASSERT_EQ(bytes_of(one, n), bytes_of(many, n)) << n;
}

TEST(SynthGptOss, RealShapePresetsAndOverrides) {
  SynthOptions o = gpt_oss("unused", "", DType::BF16, 0, "gpt-oss-20b");
  ModelConfig c = parse_model_config(synth_config(o, 1100), "x");
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_heads * c.head_dim, 4096);
  EXPECT_EQ(c.hidden_size, 2880);
  EXPECT_EQ(c.sliding_window, 128);
  o.preset = "gpt-oss-120b";
  json j = synth_config(o, 1100);
  c = parse_model_config(j, "x");
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(j["layer_types"].size(), 36u);
  EXPECT_EQ(j["layer_types"][35], "full_attention");
  // Generic overrides use gpt_oss's field names; layer_types and YaRN follow.
  o.preset = "tiny";
  o.overrides = {{"num_hidden_layers", 3}, {"num_experts", 16}, {"num_experts_per_tok", 2},
                 {"moe_intermediate_size", 96}, {"max_position_embeddings", 8192}};
  j = synth_config(o, 1100);
  c = parse_model_config(j, "x");
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(j["experts_per_token"], 2);
  EXPECT_EQ(c.moe_intermediate_size, 96);
  EXPECT_EQ(j["layer_types"], json({"sliding_attention", "full_attention", "sliding_attention"}));
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 16.0) << "8192 / original 512";
  o.overrides = {{"hidden_size", 48}};
  expect_error([&] { synth_config(o, 1100); }, {"hidden_size", "multiple of 32"});
  o.overrides = json::object();
  o.layout = "bf16";
  expect_error([&] { synth_config(o, 1100); }, {"no layout 'bf16'", "mxfp4, float"});
}

}  // namespace
}  // namespace tern
