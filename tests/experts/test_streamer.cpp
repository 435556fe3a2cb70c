// The streamer's parts: every I/O backend reads the record bytes; injected
// faults (EIO, short read, corrupt bytes) give clear errors naming the expert
// or are healed by a replica; a failed read leaves nothing behind and the
// cache stays usable; prefetch, LFU and lookahead protection; usage.bin; the
// memory planner.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include <cstring>
#include <filesystem>

#include "support/expect_error.h"
#include "support/models.h"
#include "tern/core/file.h"
#include "tern/experts/expert_cache.h"
#include "tern/experts/usage_stats.h"
#include "tern/runtime/engine.h"
#include "tern/runtime/memory_plan.h"

namespace tern {
namespace {

using testing::expect_error;
using testing::TempDir;

class StreamerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthesize_model(testing::tiny_synth(dir / "hf"));
    install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
    model = std::make_unique<TernModel>(TernModel::open(dir / "m.tern"));
  }
  const ExpertLayer& layer(size_t i) { return model->manifest().expert_layers[i]; }
  uint64_t stride() { return layer(0).stride; }
  std::string record(size_t l, int64_t e) {
    std::string want(layer(l).record_size, '\0');
    model->read_expert(layer(l), e, want.data());
    return want;
  }
  bool holds(const ExpertCache::Handle& h, size_t l, int64_t e) {
    return std::memcmp(h.data(), record(l, e).data(), layer(l).record_size) == 0;
  }
  std::filesystem::path mirror() {
    std::filesystem::copy_file(dir / "m.tern" / "experts.bin", dir / "mirror.bin");
    return dir / "mirror.bin";
  }
  TempDir dir;
  std::unique_ptr<TernModel> model;
};

TEST_F(StreamerTest, EveryBackendReadsTheRecords) {
  for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread, IoBackend::Mmap})
    for (bool direct : {true, false}) {
      ExpertStoreOptions o;
      o.backend = backend;
      o.direct_io = direct;
      o.queue_depth = 3;
      ExpertStore store(*model, o);
      ExpertCache cache(store, 16 * stride());
      std::vector<ExpertCache::Handle> hs;
      for (int64_t e = 0; e < 8; ++e) hs.push_back(cache.request(layer(1), e));  // 8 reads in flight at once
      for (int64_t e = 0; e < 8; ++e) {
        cache.wait(hs[static_cast<size_t>(e)]);
        EXPECT_TRUE(holds(hs[static_cast<size_t>(e)], 1, e)) << io_backend_name(backend) << " " << e;
      }
    }
}

TEST_F(StreamerTest, FailedReadNamesTheExpertAndLeavesTheCacheUsable) {
  for (const char* kind : {"eio", "short", "corrupt"}) {
    ExpertStoreOptions o;
    o.faults = fmt::format("{}:1:4", kind);
    ExpertStore store(*model, o);
    ExpertCache cache(store, 4 * stride());
    const char* why = std::string(kind) == "eio" ? "read error" : std::string(kind) == "short" ? "unexpected end of file"
                                                                                              : "checksum mismatch";
    expect_error([&] { cache.acquire(layer(1), 4); }, {"expert (layer 1, expert 4)", why});
    EXPECT_FALSE(cache.contains(1, 4));
    EXPECT_EQ(cache.used_bytes(), 0u);
    auto h = cache.acquire(layer(1), 3);  // other experts still read fine
    EXPECT_TRUE(holds(h, 1, 3));
    expect_error([&] { cache.acquire(layer(1), 4); }, {"expert (layer 1, expert 4)"});  // a lasting fault stays a clear error
  }
}

TEST_F(StreamerTest, ATransientFaultIsRetriedByTheNextRequest) {
  ExpertStoreOptions o;
  o.faults = "eio:*:*:*:1";  // the first read anywhere fails, then the disk is fine
  ExpertStore store(*model, o);
  ExpertCache cache(store, 4 * stride());
  expect_error([&] { cache.acquire(layer(0), 2); }, {"expert (layer 0, expert 2)", "read error"});
  auto h = cache.acquire(layer(0), 2);
  EXPECT_TRUE(holds(h, 0, 2));
}

TEST_F(StreamerTest, AReplicaHealsFaultsOfTheOther) {
  for (const char* fault : {"eio:*:*:0", "corrupt:*:*:0", "short:*:*:0"}) {
    ExpertStoreOptions o;
    o.mirrors = {std::filesystem::exists(dir / "mirror.bin") ? dir / "mirror.bin" : mirror()};
    o.faults = fault;
    ExpertStore store(*model, o);
    ExpertCache cache(store, 16 * stride());
    for (int64_t e = 0; e < 8; ++e) {
      auto h = cache.acquire(layer(1), e);
      EXPECT_TRUE(holds(h, 1, e)) << fault << " " << e;
    }
    const auto reps = store.replicas();
    ASSERT_EQ(reps.size(), 2u);
    EXPECT_GT(reps[0].failures, 0u) << fault;  // some records were routed to replica 0 first
    EXPECT_EQ(reps[1].failures, 0u);
    EXPECT_EQ(reps[1].reads, 8u) << fault;  // ... and every record came from the mirror in the end
  }
  // Both replicas failing: the error names both.
  ExpertStoreOptions o;
  o.mirrors = {dir / "mirror.bin"};
  o.faults = "eio:0:1";
  ExpertStore store(*model, o);
  ExpertCache cache(store, 4 * stride());
  expect_error([&] { cache.acquire(layer(0), 1); }, {"expert (layer 0, expert 1)", "experts.bin", "mirror.bin"});
}

TEST_F(StreamerTest, AMirrorOfAnotherSizeIsRefused) {
  File::create(dir / "short.bin").write_all("x", 1);
  ExpertStoreOptions o;
  o.mirrors = {dir / "short.bin"};
  expect_error([&] { ExpertStore store(*model, o); }, {"--mirror", "short.bin", "a mirror must be a copy"});
}

TEST_F(StreamerTest, PrefetchWarmsTheCacheAndIsAccounted) {
  ExpertStore store(*model);
  ExpertCache cache(store, 3 * stride());
  EXPECT_TRUE(cache.prefetch(layer(0), 5));
  EXPECT_FALSE(cache.prefetch(layer(0), 5));  // already there
  auto h = cache.acquire(layer(0), 5);
  EXPECT_TRUE(holds(h, 0, 5));
  ExpertCacheStats s = cache.stats();
  EXPECT_EQ(s.prefetches, 1u);
  EXPECT_EQ(s.prefetch_hits, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.prefetch_useful_bytes, stride());
  // A prefetch never evicts an expert in use; an unused prefetch evicted counts as waste.
  auto a = cache.acquire(layer(0), 0);
  auto b = cache.acquire(layer(0), 1);
  EXPECT_FALSE(cache.prefetch(layer(0), 6));  // 5, 0 and 1 are all held: no room
  h = ExpertCache::Handle();
  cache.set_protected({ExpertCache::key(0, 5)});
  EXPECT_FALSE(cache.prefetch(layer(0), 6));  // 5 is protected, 0 and 1 pinned: no room
  cache.set_protected({});
  EXPECT_TRUE(cache.prefetch(layer(0), 6));   // now 5 may go
  cache.acquire(layer(0), 2);                 // evicts the unused prefetch of 6 (LRU among unpinned)
  EXPECT_EQ(cache.stats().prefetch_wasted_bytes, stride());
}

TEST_F(StreamerTest, AnUnusedPrefetchIsEvictedBeforeDemandedExperts) {
  ExpertStore store(*model);
  ExpertCache cache(store, 3 * stride());
  // A loading record is never evicted: wait (no timing asserted) for the
  // prefetch's read to land before asking for room.
  const auto landed = [&](uint64_t records) {
    for (int i = 0; i < 10000 && cache.stats().bytes_read < records * stride(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(cache.stats().bytes_read, records * stride());
  };
  cache.acquire(layer(0), 0);
  cache.acquire(layer(0), 1);
  EXPECT_TRUE(cache.prefetch(layer(0), 5));  // newest, but at the cold end until demanded
  landed(3);
  cache.acquire(layer(0), 6);  // room for 6: the unused prediction goes, not 0
  EXPECT_TRUE(cache.contains(0, 0));
  EXPECT_TRUE(cache.contains(0, 1));
  EXPECT_FALSE(cache.contains(0, 5));
  EXPECT_EQ(cache.stats().prefetch_wasted_bytes, stride());
  // Once demanded, a prefetched expert is recent like any other.
  EXPECT_TRUE(cache.prefetch(layer(0), 7));  // evicts 0, the least recent
  landed(5);
  cache.acquire(layer(0), 7);
  cache.acquire(layer(0), 2);  // evicts 1 (least recent), not 7
  EXPECT_TRUE(cache.contains(0, 7));
  EXPECT_FALSE(cache.contains(0, 1));
  EXPECT_TRUE(cache.contains(0, 6));
}

TEST_F(StreamerTest, APredictionDoesNotEvictAnotherNotYetDemanded) {
  ExpertStore store(*model);
  ExpertCache cache(store, 3 * stride());
  cache.acquire(layer(0), 0);
  EXPECT_TRUE(cache.prefetch(layer(0), 5));
  EXPECT_TRUE(cache.prefetch(layer(0), 6));
  for (int i = 0; i < 10000 && cache.stats().bytes_read < 3 * stride(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(cache.stats().bytes_read, 3 * stride());
  EXPECT_TRUE(cache.prefetch(layer(0), 7));  // room from 0, not from the pending 5 or 6
  EXPECT_FALSE(cache.contains(0, 0));
  EXPECT_TRUE(cache.contains(0, 5));
  EXPECT_TRUE(cache.contains(0, 6));
  EXPECT_TRUE(cache.contains(0, 7));
}

TEST_F(StreamerTest, AWastedPredictionClassIsThrottledAndOthersAreNot) {
  ExpertStore store(*model);
  ExpertCache cache(store, stride());  // one record: every prefetch is evicted by the next demand
  uint64_t reads = 0;
  const auto landed = [&] {
    for (int i = 0; i < 10000 && cache.stats().bytes_read < reads * stride(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(cache.stats().bytes_read, reads * stride());
  };
  const int low = ExpertCache::prediction_rank(0, 7), first = ExpertCache::prediction_rank(0, 0);
  EXPECT_NE(low, first);
  EXPECT_EQ(ExpertCache::prediction_rank(9, 99, true), ExpertCache::kRankClasses - 1);  // clamped
  EXPECT_EQ(ExpertCache::prediction_rank(9, 99), ExpertCache::kRankClasses / 2 - 1);
  EXPECT_NE(ExpertCache::prediction_rank(0, 7, true), low);  // a prefill chunk's picks are their own class
  EXPECT_THROW(cache.prefetch(layer(0), 5, ExpertCache::kRankClasses), Error);
  // The router's 8th pick is never used: its prefetches are wasted until the class is throttled.
  int made = 0;
  for (int i = 0; i < 40; ++i) {
    if (!cache.prefetch(layer(0), 5, low)) {
      cache.acquire(layer(0), 0);  // still resident: a hit
      continue;
    }
    ++made;
    ++reads;
    landed();
    cache.acquire(layer(0), 0);  // evicts the unused prediction
    ++reads;
    landed();
  }
  EXPECT_LT(cache.prefetch_accuracy(low), ExpertCache::kMinPrefetchAccuracy);
  EXPECT_LT(made, 40);
  const ExpertCacheStats s = cache.stats();
  EXPECT_EQ(s.prefetches + s.prefetches_skipped, 40u);
  EXPECT_EQ(s.prefetch_wasted_bytes, s.prefetches * stride());
  // Throttled, one prediction of the class in kProbeEvery is still read (the
  // routing may turn predictable); the router's first pick is not throttled.
  int probes = 0;
  for (int i = 0; i < ExpertCache::kProbeEvery; ++i) {
    if (cache.prefetch(layer(0), 5, low)) {
      ++probes;
      ++reads;
      landed();
      cache.acquire(layer(0), 0);
      ++reads;
      landed();
    }
  }
  EXPECT_EQ(probes, 1);
  EXPECT_DOUBLE_EQ(cache.prefetch_accuracy(first), 1.0);
  EXPECT_TRUE(cache.prefetch(layer(0), 5, first));
  ++reads;
  landed();
  cache.acquire(layer(0), 5);  // used: the class stays trusted
  EXPECT_DOUBLE_EQ(cache.prefetch_accuracy(first), 1.0);
}

// Records of at least kLatencyBoundRecord are bandwidth-bound: a class is
// prefetched only while its accuracy beats the disk's recent utilization.
TEST_F(StreamerTest, ABandwidthBoundClassMustBeatTheDiskUtilization) {
  SynthOptions so = testing::tiny_synth(dir / "big-hf");
  so.overrides = {{"moe_intermediate_size", 4096}};
  synthesize_model(so);
  InstallOptions io = testing::quiet_install(dir / "big-hf", dir / "big.tern");
  io.expert_format = TensorFormat::Q8_0;
  install_model(io);
  const TernModel big = TernModel::open(dir / "big.tern");
  const ExpertLayer& l = big.manifest().expert_layers[0];
  ASSERT_GE(l.stride, ExpertCache::kLatencyBoundRecord);
  ExpertStoreOptions o;
  o.faults = "slow:*:*";  // every read takes 20 ms more: a disk kept busy
  ExpertStore store(big, o);
  ExpertCache cache(store, l.stride);  // one record: a prefetch is evicted by the next demand
  const int mid = ExpertCache::prediction_rank(0, 2);
  EXPECT_DOUBLE_EQ(cache.prefetch_bar(l.stride), ExpertCache::kMinPrefetchAccuracy);  // idle disk
  uint64_t reads = 0;
  const auto landed = [&] {
    for (int i = 0; i < 10000 && cache.stats().bytes_read < reads * l.record_size; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  // 8 wasted predictions, the disk idle half the time: the class's accuracy
  // 0.97^8 = 0.78 stays above the bar.
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(cache.prefetch(l, 5, mid)) << i << " utilization " << cache.disk_utilization();
    ++reads;
    landed();
    cache.acquire(l, i % 2);  // evicts it unused
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  const double accuracy = cache.prefetch_accuracy(mid);
  EXPECT_NEAR(accuracy, std::pow(0.97, 8), 1e-9);
  // Back-to-back demand reads for 1.5 s (3 time constants): the disk is busy
  // nearly all the time, and the bar rises above the class's accuracy.
  for (int i = 0; i < 75; ++i) {
    cache.acquire(l, i % 2);
    cache.prefetch(l, i % 2, mid);  // resident: not read, but samples the utilization
  }
  EXPECT_GT(cache.disk_utilization(), 0.7);
  EXPECT_GT(cache.prefetch_bar(l.stride), accuracy);
  EXPECT_DOUBLE_EQ(cache.prefetch_bar(ExpertCache::kLatencyBoundRecord - 1), ExpertCache::kMinPrefetchAccuracy);
  // Each prediction is wasted as before, the demand reads keep the disk busy.
  int made = 0;
  for (int i = 0; i < ExpertCache::kProbeEvery; ++i) {
    reads = cache.stats().bytes_read / l.record_size + 1;  // the demand reads have landed
    if (cache.prefetch(l, 5, mid)) {
      ++made;
      landed();
    }
    cache.acquire(l, i % 2);
  }
  EXPECT_EQ(made, 1);  // throttled: only the probe
  // An idle disk lowers the bar again and the class is prefetched.
  cache.acquire(l, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cache.prefetch(l, 0, mid);  // resident: samples 1 s without a read (utilization x e^-2)
  EXPECT_LT(cache.disk_utilization(), 0.3);
  EXPECT_GT(cache.prefetch_accuracy(mid), ExpertCache::kMinPrefetchAccuracy);
  EXPECT_TRUE(cache.prefetch(l, 5, mid));
}

TEST_F(StreamerTest, LfuEvictsTheLeastDemanded) {
  ExpertStore store(*model);
  ExpertCache cache(store, 2 * stride(), CachePolicy::Lfu);
  for (int i = 0; i < 3; ++i) cache.acquire(layer(0), 0);
  cache.acquire(layer(0), 1);
  cache.acquire(layer(0), 2);  // LRU would evict 0 (older); LFU evicts 1 (demanded once)
  EXPECT_TRUE(cache.contains(0, 0));
  EXPECT_FALSE(cache.contains(0, 1));
  EXPECT_TRUE(cache.contains(0, 2));
}

TEST_F(StreamerTest, LookaheadPolicyKeepsPredictedExperts) {
  ExpertStore store(*model);
  ExpertCache cache(store, 2 * stride(), CachePolicy::Lookahead);
  cache.acquire(layer(0), 0);
  cache.acquire(layer(0), 1);
  cache.set_protected({ExpertCache::key(0, 0)});  // 0 is least recent but predicted
  cache.acquire(layer(0), 2);
  EXPECT_TRUE(cache.contains(0, 0));
  EXPECT_FALSE(cache.contains(0, 1));
}

TEST_F(StreamerTest, LookaheadPolicyEvictsAnUnusedPrefetchNoLongerPredicted) {
  // A prefetch the lookahead no longer predicts was a misprediction: a demand
  // miss evicts it before a demanded expert, as under LRU (before this rule
  // the lookahead policy kept every unused prefetch until it was demanded:
  // 325 instead of 204 MiB read per token, docs/RESULTS.md 2026-12-06).
  ExpertStore store(*model);
  ExpertCache cache(store, 2 * stride(), CachePolicy::Lookahead);
  cache.acquire(layer(0), 0);
  cache.set_protected({ExpertCache::key(0, 5)});
  EXPECT_TRUE(cache.prefetch(layer(0), 5));
  for (int i = 0; i < 10000 && cache.stats().bytes_read < 2 * stride(); ++i)  // no timing asserted
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(cache.stats().bytes_read, 2 * stride());
  cache.acquire(layer(0), 6);  // 5 still predicted: 0 goes
  EXPECT_FALSE(cache.contains(0, 0));
  EXPECT_TRUE(cache.contains(0, 5));
  cache.set_protected({});    // the next step predicts other experts
  cache.acquire(layer(0), 1);  // the stale prediction goes, not 6
  EXPECT_FALSE(cache.contains(0, 5));
  EXPECT_TRUE(cache.contains(0, 6));
  EXPECT_EQ(cache.stats().prefetch_wasted_bytes, stride());
}

TEST_F(StreamerTest, UsageFileRoundTripsAndIsRefusedWhenForeignOrCorrupt) {
  ExpertCounts counts = {{ExpertCache::key(0, 3), 7}, {ExpertCache::key(1, 5), 2}};
  const auto path = dir / "m.tern" / "usage.bin";
  save_expert_usage(path, *model, counts);
  std::string why;
  auto back = load_expert_usage(path, *model, &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(*back, counts);
  testing::corrupt_byte(path, 30);
  EXPECT_FALSE(load_expert_usage(path, *model, &why).has_value());
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;
  // Another model (another seed: another manifest) refuses it.
  synthesize_model(testing::tiny_synth(dir / "hf2", DType::BF16, 99));
  install_model(testing::quiet_install(dir / "hf2", dir / "other.tern"));
  TernModel other = TernModel::open(dir / "other.tern");
  save_expert_usage(path, *model, counts);
  EXPECT_FALSE(load_expert_usage(path, other, &why).has_value());
  EXPECT_NE(why.find("another model"), std::string::npos) << why;
}

TEST_F(StreamerTest, EngineRecoversFromAFailedReadWithTheSameTokens) {
  EngineOptions eo;
  eo.model = dir / "m.tern";
  eo.record_usage = false;
  eo.ram_bytes = 2 * stride();
  const std::vector<int32_t> prompt = {11, 48, 85, 122, 159};
  GenerateOptions go;
  go.max_new_tokens = 8;
  go.sampling.greedy = true;
  Engine clean(eo);
  Session s0(clean);
  const auto want = generate(s0, prompt, go, nullptr, nullptr);
  eo.io_faults = "eio:*:*:*:1";
  Engine faulty(eo);
  Session s1(faulty);
  expect_error([&] { generate(s1, prompt, go, nullptr, nullptr); }, {"read error", "expert (layer"});
  Session s2(faulty);  // the next request on the same engine
  EXPECT_EQ(generate(s2, prompt, go, nullptr, nullptr), want);
}

TEST(MemoryPlan, BudgetIsWhatRemainsAndTheMinimumIsEnforced) {
  MemoryNeeds n;
  n.available = 16ull << 30;
  n.trunk = 2ull << 30;
  n.kv = 1ull << 30;
  n.scratch = 100ull << 20;
  n.all_experts = 60ull << 30;
  n.min_budget = 100ull << 20;
  MemoryPlan p = plan_memory(n);
  EXPECT_EQ(p.usable, n.available);
  EXPECT_EQ(p.margin, n.available / 20 + (64ull << 20));
  EXPECT_EQ(p.budget, n.available - n.trunk - n.kv - n.scratch - p.margin);
  EXPECT_FALSE(p.all_resident);
  n.cgroup_limit = 8ull << 30;  // a cgroup below MemAvailable wins
  p = plan_memory(n);
  EXPECT_EQ(p.usable, n.cgroup_limit);
  n.all_experts = 1ull << 30;  // everything fits: the budget is just the experts
  p = plan_memory(n);
  EXPECT_EQ(p.budget, n.all_experts);
  EXPECT_TRUE(p.all_resident);
  n.cgroup_limit = 3ull << 30;  // not even the minimum
  expect_error([&] { plan_memory(n); }, {"--ram auto", "below the minimum", "cgroup limit"});
}

}  // namespace
}  // namespace tern
