// Sessions fed together in one forward batch (the server's concurrent
// requests) get exactly the logits they get when fed alone, for both
// architectures (Mixtral with and without its sliding window), with prompts of different lengths, mixed prefill and
// decode, and a sliding-window model whose rings wrap.
#include <gtest/gtest.h>

#include <vector>

#include "support/models.h"
#include "tern/core/error.h"
#include "tern/runtime/engine.h"

namespace tern {
namespace {

using testing::TempDir;

class BatchForward : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SynthOptions so = testing::tiny_synth(dir / "hf");
    so.architecture = GetParam();
    if (GetParam() == "mixtral_window") {  // every layer slides, rings of 8
      so.architecture = "mixtral";
      so.overrides["sliding_window"] = 8;
    }
    synthesize_model(so);
    install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
    EngineOptions eo;
    eo.model = dir / "m.tern";
    eo.threads = 2;
    eo.record_usage = false;
    eo.prefill_chunk = 5;  // prompts run in several chunks
    engine = std::make_unique<Engine>(eo);
  }
  std::vector<int32_t> prompt(int n, int salt) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((7 + 131 * i + salt) % 200);
    return ids;
  }
  TempDir dir;
  std::unique_ptr<Engine> engine;
};

TEST_P(BatchForward, EverySequenceGetsItsAloneLogitsBitForBit) {
  const std::vector<std::vector<int32_t>> prompts = {prompt(3, 1), prompt(11, 2), prompt(20, 3)};
  // Alone: each prompt, then three decode steps with fixed tokens.
  std::vector<std::vector<std::vector<float>>> alone(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Session s(*engine);
    alone[i].push_back(s.feed(prompts[i]));
    for (int32_t t : {5, 9, 17}) alone[i].push_back(s.feed(std::vector<int32_t>{t + static_cast<int32_t>(i)}));
  }
  // Together: all prompts in one batch, then each decode step in one batch;
  // and a late joiner: sequence 2 prefills while 0 and 1 decode.
  std::vector<Session> sessions;
  for (size_t i = 0; i < prompts.size(); ++i) sessions.emplace_back(*engine);
  std::vector<Session*> all;
  for (auto& s : sessions) all.push_back(&s);
  std::vector<std::span<const int32_t>> first = {prompts[0], prompts[1]};
  Session::feed_batch(std::span<Session* const>(all.data(), 2), first);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(sessions[i].logits(), alone[i][0]) << "prompt " << i;
  for (int step = 0; step < 3; ++step) {
    const int32_t base = std::vector<int32_t>{5, 9, 17}[static_cast<size_t>(step)];
    std::vector<std::vector<int32_t>> next = {{base}, {base + 1}};
    std::vector<std::span<const int32_t>> feed = {next[0], next[1]};
    std::vector<Session*> members = {all[0], all[1]};
    if (step == 0) {  // sequence 2 joins with its whole prompt
      members.push_back(all[2]);
      feed.push_back(prompts[2]);
    } else {  // it decodes its own schedule, one step behind
      next.push_back({std::vector<int32_t>{5, 9, 17}[static_cast<size_t>(step) - 1] + 2});
      members.push_back(all[2]);
      feed.push_back(next[2]);
    }
    Session::feed_batch(members, feed);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(sessions[i].logits(), alone[i][static_cast<size_t>(step) + 1]) << step << " " << i;
    EXPECT_EQ(sessions[2].logits(), alone[2][static_cast<size_t>(step)]) << step;
  }
}

// A chat's next turn re-renders the conversation and diverges where the
// last reply began: the session steps back to the checkpoint taken after the
// prompt (for gpt_oss restoring rings the reply has overwritten: window 8,
// reply 10 tokens) and continues exactly as a fresh session would.
TEST_P(BatchForward, SteppingBackToACheckpointGivesAFreshSessionsLogits) {
  const std::vector<int32_t> prompt_a = prompt(13, 4);
  Session s(*engine);
  s.feed(prompt_a);
  s.checkpoint();
  for (int32_t t : {5, 9, 17, 33, 41, 2, 8, 11, 60, 70}) s.feed(std::vector<int32_t>{t});
  std::vector<int32_t> next = prompt_a;
  next.insert(next.end(), {3, 99, 4, 12});
  EXPECT_EQ(s.keep_common_prefix(next), static_cast<int64_t>(prompt_a.size()));
  s.feed(std::span<const int32_t>(next).subspan(prompt_a.size()));
  Session fresh(*engine);
  fresh.feed(next);
  EXPECT_EQ(s.logits(), fresh.logits());

  // Diverging before every checkpoint: a model with rings starts over, one
  // without keeps the common prefix; both give the fresh logits.
  const bool rings = s.kv().has_rings();
  EXPECT_EQ(rings, GetParam() == "gpt_oss" || GetParam() == "mixtral_window" || GetParam() == "qwen3_next" ||
                       GetParam() == "gemma4");
  std::vector<int32_t> early(prompt_a.begin(), prompt_a.begin() + 5);
  early.push_back(150);
  const int64_t kept = s.keep_common_prefix(early);
  EXPECT_EQ(kept, rings ? 0 : 5);
  s.feed(std::span<const int32_t>(early).subspan(static_cast<size_t>(kept)));
  Session fresh_early(*engine);
  fresh_early.feed(early);
  EXPECT_EQ(s.logits(), fresh_early.logits());
}

// Checkpoints are bounded in bytes (Gemma 4 26B-A4B's rings are 400 MiB a
// copy): under a limit smaller than one copy only the newest is kept, so a
// turn diverging between the two steps back to nothing and starts over, where
// the default limit keeps both and steps back to the older one. Either way the
// logits are a fresh session's.
TEST_P(BatchForward, CheckpointsStayWithinTheirByteLimit) {
  if (!Session(*engine).kv().has_rings()) GTEST_SKIP() << "no sliding-window rings: checkpoint() is a no-op";
  const std::vector<int32_t> first = prompt(7, 5);
  std::vector<int32_t> diverged(first.begin(), first.end());
  diverged.insert(diverged.end(), {3, 150});
  Session fresh(*engine);
  fresh.feed(diverged);
  for (const bool tight : {false, true}) {
    Session s(*engine);
    if (tight) s.set_checkpoint_limit(1);
    s.feed(first);
    s.checkpoint();
    for (int32_t t : {3, 9, 17}) s.feed(std::vector<int32_t>{t});
    s.checkpoint();
    EXPECT_EQ(s.checkpoint_count(), tight ? 1u : 2u) << tight;
    const int64_t kept = s.keep_common_prefix(diverged);
    EXPECT_EQ(kept, tight ? 0 : 7) << tight;
    s.feed(std::span<const int32_t>(diverged).subspan(static_cast<size_t>(kept)));
    EXPECT_EQ(s.logits(), fresh.logits()) << tight;
  }
}

// A kept session written to a file and read back (the server keeps
// conversations across restarts) continues exactly as the original: keys,
// values, rings, linear-attention states and checkpoints all survive.
TEST_P(BatchForward, ASavedSessionContinuesBitForBit) {
  Session s(*engine);
  s.feed(prompt(9, 6));
  s.checkpoint();
  for (int32_t t : {5, 9, 17}) s.feed(std::vector<int32_t>{t});
  const uint64_t fingerprint = Session::fingerprint(*engine);
  s.save(dir / "session.bin", fingerprint);
  Session loaded(*engine);
  loaded.load(dir / "session.bin", fingerprint);
  EXPECT_EQ(loaded.tokens(), s.tokens());
  s.feed(std::vector<int32_t>{21});
  loaded.feed(std::vector<int32_t>{21});
  EXPECT_EQ(loaded.logits(), s.logits());
  // Its checkpoint came along: stepping back to it matches a fresh session.
  std::vector<int32_t> other = prompt(9, 6);
  other.push_back(44);
  EXPECT_EQ(loaded.keep_common_prefix(other), 9);
  loaded.feed(std::vector<int32_t>{44});
  Session fresh(*engine);
  fresh.feed(other);
  EXPECT_EQ(loaded.logits(), fresh.logits());
}

// The KV cache of a sliding layer holds only its window: gpt-oss-20b's
// shape at a 4096-token context (12 full layers x 4096 positions + 12
// sliding layers x 128, 8 KV heads x 64 floats, keys and values).
TEST(KvCacheLayout, SlidingLayersKeepOnlyTheirWindow) {
  ModelConfig c;
  c.num_layers = 24;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.sliding_window = 128;
  for (int l = 0; l < 24; ++l) c.sliding_layers.push_back(l % 2 == 0);
  EXPECT_EQ(kv_cache_bytes(c, 4096), uint64_t{2} * 4 * 512 * (12 * 4096 + 12 * 128));
  c.sliding_window = 0;
  c.sliding_layers.clear();
  EXPECT_EQ(kv_cache_bytes(c, 4096), uint64_t{2} * 4 * 512 * 24 * 4096);
}

// Qwen3-Next-80B-A3B's cache at a 4096-token context: its 12 full-attention
// layers keep every position (2 KV heads x 256 floats, keys and values), its
// 36 Gated DeltaNet layers a state each of 3 conv inputs of 8192 channels
// plus 32 value heads' 128 x 128 matrices, whatever the context.
TEST(KvCacheLayout, LinearAttentionLayersKeepAFixedState) {
  ModelConfig c;
  c.num_layers = 48;
  c.num_kv_heads = 2;
  c.head_dim = 256;
  ModelConfig::LinearAttention& la = c.linear_attention;
  la = {16, 32, 128, 128, 4, {}};
  for (int l = 0; l < 48; ++l) la.layers.push_back((l + 1) % 4 != 0);
  const uint64_t state = 3 * 8192 + 32 * 128 * 128;
  EXPECT_EQ(kv_cache_bytes(c, 4096), 4 * (uint64_t{2} * 512 * 12 * 4096 + 36 * state));
  EXPECT_EQ(kv_cache_bytes(c, 65536) - kv_cache_bytes(c, 4096), 4 * uint64_t{2} * 512 * 12 * (65536 - 4096));
}

TEST_P(BatchForward, RejectsMisuse) {
  Session a(*engine);
  std::vector<Session*> twice = {&a, &a};
  std::vector<int32_t> t = {1};
  std::vector<std::span<const int32_t>> feed = {t, t};
  EXPECT_THROW(Session::feed_batch(twice, feed), Error);
  std::vector<Session*> one = {&a};
  std::vector<std::span<const int32_t>> none = {std::span<const int32_t>()};
  EXPECT_THROW(Session::feed_batch(one, none), Error);
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchForward, ::testing::Values("qwen3_moe", "gpt_oss", "mixtral", "mixtral_window", "olmoe",
                                                                      "qwen2_moe", "deepseek_v3",
                                                                      "glm4_moe", "qwen3_next", "gemma4"));

}  // namespace
}  // namespace tern
