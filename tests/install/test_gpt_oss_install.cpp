// Installing gpt_oss checkpoints: experts fused over a layer, gate/up
// interleaved, in the released MXFP4 layout (repacked bit-exact into Tern's
// MXFP4) and in the dequantized float layout (stored [in, out]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/format/safetensors.h"
#include "tern/format/tern_model.h"
#include "tern/install/installer.h"
#include "tern/quant/quantize.h"
#include "tern/synth/synth.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::TempDir;

SynthOptions gpt_oss_synth(const std::filesystem::path& out, const std::string& layout, DType dtype,
                           uint64_t seed = 5) {
  SynthOptions o;
  o.architecture = "gpt_oss";
  o.preset = "tiny";
  o.layout = layout;
  o.output = out;
  o.dtype = dtype;
  o.seed = seed;
  o.quiet = true;
  o.force = true;
  return o;
}

// Raw bytes of a checkpoint tensor.
std::string tensor_bytes(const SafetensorsCheckpoint& ck, const std::string& name) {
  const TensorInfo& t = ck.at(name);
  std::string b(t.nbytes, '\0');
  ck.read(t, b.data());
  return b;
}

// A float checkpoint tensor as F32 values.
std::vector<float> tensor_f32(const SafetensorsCheckpoint& ck, const std::string& name) {
  const TensorInfo& t = ck.at(name);
  const std::string b = tensor_bytes(ck, name);
  std::vector<float> v(t.numel());
  convert_elements(b.data(), format_for_dtype(t.dtype), v.data(), TensorFormat::F32, v.size());
  return v;
}

// Rewrites dir/model.safetensors: edit(spec, bytes) may change any tensor
// (dtype, shape, bytes); returning false drops it.
void rewrite_checkpoint(const std::filesystem::path& dir,
                        const std::function<bool(TensorSpec&, std::string&)>& edit) {
  std::vector<TensorSpec> specs;
  std::vector<std::string> data;
  {
    auto ck = SafetensorsCheckpoint::open(dir);
    for (const auto& name : ck.names()) {
      TensorSpec spec{name, ck.at(name).dtype, ck.at(name).shape};
      std::string bytes = tensor_bytes(ck, name);
      if (!edit(spec, bytes)) continue;
      specs.push_back(spec);
      data.push_back(std::move(bytes));
    }
  }
  SafetensorsWriter w(dir / "model.tmp", specs);
  for (const auto& b : data) w.write(b.data(), b.size());
  w.finish();
  std::filesystem::rename(dir / "model.tmp", dir / "model.safetensors");
}

std::string read_record(const TernModel& m, const ExpertLayer& l, int64_t e) {
  std::string rec(l.record_size, '\0');
  m.read_expert(l, e, rec.data());
  m.check_expert(l, e, rec.data());
  return rec;
}

// A section's values, dequantized.
std::vector<float> section_f32(const ExpertLayer& l, const std::string& rec, const std::string& name) {
  const ExpertSection* s = l.find_section(name);
  EXPECT_NE(s, nullptr) << name;
  if (!s) return {};
  int64_t n = 1;
  for (int64_t d : s->shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  const int64_t row = s->shape.back();
  for (int64_t r = 0; r < n / row; ++r)
    dequantize_row(s->format, rec.data() + s->offset + static_cast<uint64_t>(r) * format_bytes(s->format, {row}),
                   v.data() + r * row, row);
  return v;
}

// OpenAI/HF MXFP4 decoding, written here from docs/gpt_oss_facts.md §3.
float hf_mxfp4_value(const uint8_t* blocks_row, const uint8_t* scales_row, int64_t k) {
  static const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const uint8_t byte = blocks_row[k / 2];
  const int code = k % 2 == 0 ? byte & 15 : byte >> 4;
  return std::ldexp(fp4[code], scales_row[k / 32] - 127);
}

constexpr int64_t kLayers = 4, kExperts = 8, kH = 64, kI = 64;  // the tiny preset

class GptOssInstallTest : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(GptOssInstallTest, FusedTransposedFloatExpertsAreCutExactly) {
  synthesize_model(gpt_oss_synth(dir / "hf", "float", DType::F32));
  // Make every expert value unique (its flat index), so any wrong row,
  // column, expert or interleave shows.
  rewrite_checkpoint(dir / "hf", [](TensorSpec& spec, std::string& bytes) {
    if (spec.name.find(".mlp.experts.") == std::string::npos) return true;
    std::vector<float> v(bytes.size() / 4);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.25f;
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return true;
  });
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::F32;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  ASSERT_EQ(m.manifest().expert_layers.size(), static_cast<size_t>(kLayers));
  EXPECT_EQ(m.manifest().source["layout"], "float");
  for (const ExpertLayer& l : m.manifest().expert_layers) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l.layer);
    const auto gu = tensor_f32(ck, p + "gate_up_proj");        // [E, H, 2I]
    const auto dn = tensor_f32(ck, p + "down_proj");           // [E, I, H]
    const auto gub = tensor_f32(ck, p + "gate_up_proj_bias");  // [E, 2I]
    const auto db = tensor_f32(ck, p + "down_proj_bias");      // [E, H]
    for (const auto& s : l.sections) EXPECT_EQ(s.format, TensorFormat::F32) << s.name;
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string rec = read_record(m, l, e);
      const auto gate = section_f32(l, rec, "gate"), up = section_f32(l, rec, "up"), down = section_f32(l, rec, "down");
      const auto gate_b = section_f32(l, rec, "gate_bias"), up_b = section_f32(l, rec, "up_bias"),
                 down_b = section_f32(l, rec, "down_bias");
      ASSERT_EQ(gate.size(), static_cast<size_t>(kI * kH));
      ASSERT_EQ(down.size(), static_cast<size_t>(kH * kI));
      for (int64_t r = 0; r < kI; ++r)
        for (int64_t c = 0; c < kH; ++c) {
          ASSERT_EQ(gate[r * kH + c], gu[(e * kH + c) * 2 * kI + 2 * r]) << l.layer << " " << e << " " << r << " " << c;
          ASSERT_EQ(up[r * kH + c], gu[(e * kH + c) * 2 * kI + 2 * r + 1]) << l.layer << " " << e << " " << r;
        }
      for (int64_t r = 0; r < kH; ++r)
        for (int64_t c = 0; c < kI; ++c) ASSERT_EQ(down[r * kI + c], dn[(e * kI + c) * kH + r]) << r << " " << c;
      for (int64_t r = 0; r < kI; ++r) {
        ASSERT_EQ(gate_b[r], gub[e * 2 * kI + 2 * r]);
        ASSERT_EQ(up_b[r], gub[e * 2 * kI + 2 * r + 1]);
      }
      for (int64_t r = 0; r < kH; ++r) ASSERT_EQ(down_b[r], db[e * kH + r]);
    }
  }
  EXPECT_TRUE(m.verify().ok());
}

TEST_F(GptOssInstallTest, Bf16FloatExpertsTransposeBitExactly) {
  synthesize_model(gpt_oss_synth(dir / "hf", "float", DType::BF16));
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::BF16;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  const ExpertLayer& l = m.manifest().expert_layers[2];
  const std::string gu = tensor_bytes(ck, "model.layers.2.mlp.experts.gate_up_proj");
  const std::string rec = read_record(m, l, 6);
  const ExpertSection& up = *l.find_section("up");
  EXPECT_EQ(up.format, TensorFormat::BF16);
  EXPECT_EQ(l.find_section("up_bias")->format, TensorFormat::F32) << "vectors in records are always F32";
  for (int64_t r = 0; r < kI; ++r)
    for (int64_t c = 0; c < kH; ++c)
      ASSERT_EQ(std::memcmp(rec.data() + up.offset + (r * kH + c) * 2, gu.data() + ((6 * kH + c) * 2 * kI + 2 * r + 1) * 2, 2),
                0)
          << r << " " << c;
}

TEST_F(GptOssInstallTest, Mxfp4ExpertsAreRepackedBitExactly) {
  synthesize_model(gpt_oss_synth(dir / "hf", "", DType::BF16));
  install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));  // formats: source
  TernModel m = TernModel::open(dir / "m.tern");
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  EXPECT_EQ(m.manifest().source["layout"], "mxfp4");
  for (const ExpertLayer& l : m.manifest().expert_layers) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l.layer);
    const std::string gub = tensor_bytes(ck, p + "gate_up_proj_blocks"), gus = tensor_bytes(ck, p + "gate_up_proj_scales");
    const std::string dnb = tensor_bytes(ck, p + "down_proj_blocks"), dns = tensor_bytes(ck, p + "down_proj_scales");
    const auto gu_bias = tensor_f32(ck, p + "gate_up_proj_bias");
    for (const char* name : {"gate", "up", "down"}) EXPECT_EQ(l.find_section(name)->format, TensorFormat::MXFP4);
    EXPECT_EQ(l.record_size, 3u * (kI * kH / 32 * 17) + (2 * kI + kH) * 4);
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string rec = read_record(m, l, e);
      // gate row r = fused row 2r, up row r = 2r + 1, down row r = row r; G = 2 blocks per row.
      auto check = [&](const char* name, const std::string& blocks, const std::string& scales, int64_t src_rows,
                       int64_t start, int64_t step, int64_t rows, int64_t cols) {
        const ExpertSection& s = *l.find_section(name);
        const int64_t groups = cols / 32;
        const auto values = section_f32(l, rec, name);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t src = (e * src_rows + start + r * step) * groups;
          const auto* brow = reinterpret_cast<const uint8_t*>(blocks.data()) + src * 16;
          const auto* srow = reinterpret_cast<const uint8_t*>(scales.data()) + src;
          for (int64_t g = 0; g < groups; ++g) {
            const auto* out = reinterpret_cast<const uint8_t*>(rec.data()) + s.offset + (r * groups + g) * 17;
            ASSERT_EQ(out[0], srow[g]) << name << " e" << e << " r" << r << ": the scale byte is copied";
            for (int j = 0; j < 16; ++j) {
              auto code = [&](int k) { return (brow[g * 16 + k / 2] >> (4 * (k % 2))) & 15; };
              ASSERT_EQ(out[1 + j], code(j) | code(j + 16) << 4) << name << " e" << e << " r" << r << " j" << j;
            }
          }
          for (int64_t k = 0; k < cols; ++k)
            ASSERT_EQ(values[r * cols + k], hf_mxfp4_value(brow, srow, k)) << name << " r" << r << " k" << k;
        }
      };
      check("gate", gub, gus, 2 * kI, 0, 2, kI, kH);
      check("up", gub, gus, 2 * kI, 1, 2, kI, kH);
      check("down", dnb, dns, kH, 0, 1, kH, kI);
      const auto up_bias = section_f32(l, rec, "up_bias");
      for (int64_t r = 0; r < kI; ++r) ASSERT_EQ(up_bias[r], gu_bias[e * 2 * kI + 2 * r + 1]);
    }
  }
  // The CLI's defaults (q4_k with fallback, MXFP4 kept) and an explicit
  // mxfp4 give the same bytes.
  const std::string experts = testing::read_bytes(dir / "m.tern" / "experts.bin");
  for (int variant = 0; variant < 2; ++variant) {
    auto opt = testing::quiet_install(dir / "hf", dir / "m2.tern");
    opt.force = true;
    opt.expert_format = variant == 0 ? TensorFormat::Q4_K : TensorFormat::MXFP4;
    opt.expert_fallback = variant == 0;
    opt.keep_mxfp4_experts = variant == 0;
    install_model(opt);
    EXPECT_EQ(testing::read_bytes(dir / "m2.tern" / "experts.bin"), experts) << variant;
  }
}

TEST_F(GptOssInstallTest, ExplicitExpertFormatRequantizesMxfp4) {
  synthesize_model(gpt_oss_synth(dir / "hf", "mxfp4", DType::F32));
  install_model(testing::quiet_install(dir / "hf", dir / "exact.tern"));
  auto opt = testing::quiet_install(dir / "hf", dir / "q8.tern");
  opt.expert_format = TensorFormat::Q8_0;
  install_model(opt);
  TernModel exact = TernModel::open(dir / "exact.tern"), q8 = TernModel::open(dir / "q8.tern");
  const ExpertLayer& a = exact.manifest().expert_layers[1];
  const ExpertLayer& b = q8.manifest().expert_layers[1];
  EXPECT_EQ(b.find_section("gate")->format, TensorFormat::Q8_0);
  EXPECT_EQ(b.find_section("down")->format, TensorFormat::Q8_0);
  EXPECT_EQ(b.find_section("down_bias")->format, TensorFormat::F32);
  const std::string ra = read_record(exact, a, 3), rb = read_record(q8, b, 3);
  for (const char* name : {"gate", "up", "down"}) {
    const auto want = section_f32(a, ra, name), got = section_f32(b, rb, name);
    ASSERT_EQ(want.size(), got.size());
    // Q8_0 of exactly dequantized values: per block |error| <= max|x| / 127 / 2.
    for (size_t blk = 0; blk < want.size() / 32; ++blk) {
      float amax = 0;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::abs(want[blk * 32 + i]));
      for (size_t i = 0; i < 32; ++i)
        ASSERT_LE(std::abs(got[blk * 32 + i] - want[blk * 32 + i]), amax / 127.0f * 0.6f + 1e-12f) << name << " " << i;
    }
  }
  EXPECT_EQ(section_f32(a, ra, "gate_bias"), section_f32(b, rb, "gate_bias"));
  EXPECT_TRUE(q8.verify().ok());
}

TEST_F(GptOssInstallTest, FloatLayoutOfTheSameSeedInstallsTheSameExperts) {
  synthesize_model(gpt_oss_synth(dir / "mx", "mxfp4", DType::F32, 11));
  auto fl_opt = gpt_oss_synth(dir / "fl", "float", DType::F32, 11);
  fl_opt.shard_bytes = 256 * 1024;  // experts sliced across shards too
  EXPECT_GT(synthesize_model(fl_opt).num_shards, 2u);
  install_model(testing::quiet_install(dir / "mx", dir / "mx.tern"));
  auto opt = testing::quiet_install(dir / "fl", dir / "fl.tern");
  opt.expert_format = TensorFormat::F32;
  install_model(opt);
  TernModel a = TernModel::open(dir / "mx.tern"), b = TernModel::open(dir / "fl.tern");
  ASSERT_EQ(a.manifest().trunk.size(), b.manifest().trunk.size());
  for (size_t i = 0; i < a.manifest().trunk.size(); ++i)
    EXPECT_EQ(a.manifest().trunk[i].checksum, b.manifest().trunk[i].checksum) << a.manifest().trunk[i].name;
  int64_t compared = 0;
  for (size_t li = 0; li < a.manifest().expert_layers.size(); ++li) {
    const ExpertLayer& la = a.manifest().expert_layers[li];
    const ExpertLayer& lb = b.manifest().expert_layers[li];
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string ra = read_record(a, la, e), rb = read_record(b, lb, e);
      for (const ExpertSection& s : la.sections) {
        const auto va = section_f32(la, ra, s.name), vb = section_f32(lb, rb, s.name);
        ASSERT_EQ(va, vb) << "layer " << la.layer << " expert " << e << " section " << s.name;
        compared += static_cast<int64_t>(va.size());
      }
    }
  }
  EXPECT_EQ(compared, kLayers * kExperts * (3 * kI * kH + 2 * kI + kH));
}

TEST_F(GptOssInstallTest, DefaultFormatsForTheFloatLayout) {
  synthesize_model(gpt_oss_synth(dir / "hf", "float", DType::BF16));
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::Q4_K;  // the CLI's defaults
  opt.trunk_format = TensorFormat::Q8_0;
  opt.expert_fallback = opt.trunk_fallback = opt.keep_mxfp4_experts = true;
  install_model(opt);
  TernModel m = TernModel::open(dir / "m.tern");
  const ExpertLayer& l = m.manifest().expert_layers[0];
  EXPECT_EQ(l.find_section("gate")->format, TensorFormat::Q4_0) << "rows of 64 do not fit q4_k";
  EXPECT_EQ(l.find_section("gate_bias")->format, TensorFormat::F32);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.self_attn.q_proj.weight").format, TensorFormat::Q8_0);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.self_attn.q_proj.bias").format, TensorFormat::F32);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.self_attn.sinks").format, TensorFormat::F32);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.mlp.router.weight").format, TensorFormat::F32);
  EXPECT_EQ(m.trunk_tensor("model.layers.0.mlp.router.bias").format, TensorFormat::F32);
  EXPECT_TRUE(m.verify().ok());
}

TEST_F(GptOssInstallTest, SummaryCountsEveryExpertWeightAndBias) {
  synthesize_model(gpt_oss_synth(dir / "hf", "", DType::BF16));
  install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
  TernModel m = TernModel::open(dir / "m.tern");
  auto ck = SafetensorsCheckpoint::open(dir / "hf");
  uint64_t trunk = 0;
  for (const auto& name : ck.names())
    if (name.find(".mlp.experts.") == std::string::npos) trunk += ck.at(name).numel();
  const uint64_t per_expert = 3 * kI * kH + 2 * kI + kH;
  const ModelSummary s = m.summary();
  EXPECT_EQ(s.trunk_params, trunk);
  EXPECT_EQ(s.expert_params, kLayers * kExperts * per_expert);
  EXPECT_EQ(s.active_params, trunk + kLayers * 4 * per_expert);
  EXPECT_EQ(s.moe_layers, kLayers);
  EXPECT_EQ(s.experts_per_token, 4);
  EXPECT_EQ(s.expert_bytes_per_token, kLayers * 4 * (3u * (kI * kH / 32 * 17) + (2 * kI + kH) * 4));
  const VerifyReport v = m.verify();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.experts, static_cast<uint64_t>(kLayers * kExperts));
}

TEST_F(GptOssInstallTest, ScaleByte255IsRefusedNamingTensorExpertAndRow) {
  synthesize_model(gpt_oss_synth(dir / "hf", "", DType::BF16));
  const std::string name = "model.layers.2.mlp.experts.down_proj_scales";  // [8, 64, 2]
  rewrite_checkpoint(dir / "hf", [&](TensorSpec& spec, std::string& bytes) {
    if (spec.name == name) bytes[(5 * 64 + 17) * 2 + 1] = static_cast<char>(255);  // expert 5, row 17, block 1
    return true;
  });
  expect_error([&] { install_model(testing::quiet_install(dir / "hf", dir / "m.tern")); },
               {name, "expert 5", "row 17 block 1", "scale byte 255"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tern"));
  // Requantizing reads the same bytes and refuses them too.
  auto opt = testing::quiet_install(dir / "hf", dir / "m.tern");
  opt.expert_format = TensorFormat::Q8_0;
  expect_error([&] { install_model(opt); }, {name, "expert 5", "scale byte 255"});
}

TEST_F(GptOssInstallTest, WrongDtypesAndMissingTensorsAreClearErrors) {
  synthesize_model(gpt_oss_synth(dir / "hf", "", DType::BF16));
  const std::filesystem::path hf = dir / "hf";
  auto install = [&] { install_model(testing::quiet_install(hf, dir / "m.tern")); };
  // Scales stored as BF16.
  rewrite_checkpoint(hf, [](TensorSpec& spec, std::string& bytes) {
    if (spec.name == "model.layers.0.mlp.experts.gate_up_proj_scales") {
      spec.dtype = DType::BF16;
      bytes.resize(bytes.size() * 2);
    }
    return true;
  });
  expect_error(install, {"model.layers.0.mlp.experts.gate_up_proj_scales", "has dtype BF16", "MXFP4 scales are U8"});
  // A float weight stored as U8.
  synthesize_model(gpt_oss_synth(hf, "", DType::BF16));
  rewrite_checkpoint(hf, [](TensorSpec& spec, std::string& bytes) {
    if (spec.name == "model.layers.1.self_attn.q_proj.weight") {
      spec.dtype = DType::U8;
      bytes.resize(bytes.size() / 2);
    }
    return true;
  });
  expect_error(install, {"model.layers.1.self_attn.q_proj.weight", "has dtype U8", "U8 only as MXFP4 blocks and scales"});
  // A missing blocks tensor names the layout it was read as.
  synthesize_model(gpt_oss_synth(hf, "", DType::BF16));
  rewrite_checkpoint(hf, [](TensorSpec& spec, std::string&) {
    return spec.name != "model.layers.3.mlp.experts.down_proj_blocks";
  });
  expect_error(install, {"model.layers.3.mlp.experts.down_proj_blocks", "missing", "mxfp4 layout", "mxfp4, float"});
  // A fused tensor of the wrong shape names the config fields.
  synthesize_model(gpt_oss_synth(hf, "float", DType::BF16));
  auto cfg = json::parse(testing::read_bytes(hf / "config.json"));
  cfg["intermediate_size"] = 32;
  testing::write_bytes(hf / "config.json", cfg.dump());
  expect_error(install, {"gate_up_proj", "has shape [8, 64, 128]", "implies [8, 64, 64]",
                         "[num_local_experts, hidden_size, 2 x intermediate_size]"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tern"));
}

TEST_F(GptOssInstallTest, ManifestCheckRefusesNonF32VectorSections) {
  synthesize_model(gpt_oss_synth(dir / "hf", "", DType::BF16));
  install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
  const auto path = dir / "m.tern" / "manifest.json";
  auto j = json::parse(testing::read_bytes(path));
  EXPECT_NO_THROW(TernModel::open(dir / "m.tern"));
  json& sections = j["experts"]["layers"][0]["sections"];
  ASSERT_EQ(sections[3]["name"], "gate_bias");
  // bf16 gate_bias, then every later section moved up: a well-formed record, but not one Tern writes.
  const uint64_t shrink = sections[3]["size"].get<uint64_t>() / 2;
  sections[3]["format"] = "bf16";
  sections[3]["size"] = shrink;
  for (size_t i = 4; i < sections.size(); ++i) sections[i]["offset"] = sections[i]["offset"].get<uint64_t>() - shrink;
  j["experts"]["layers"][0]["record_size"] = j["experts"]["layers"][0]["record_size"].get<uint64_t>() - shrink;
  testing::write_bytes(path, j.dump());
  expect_error([&] { TernModel::open(dir / "m.tern"); }, {"expert layer 0", "gate_bias", "bf16", "must be f32"});
}

}  // namespace
}  // namespace tern
