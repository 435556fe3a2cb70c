#include "tern/experts/expert_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/expect_error.h"
#include "support/models.h"

namespace tern {
namespace {

using testing::expect_error;
using testing::TempDir;

class ExpertCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthesize_model(testing::tiny_synth(dir / "hf"));
    install_model(testing::quiet_install(dir / "hf", dir / "m.tern"));
    model = std::make_unique<TernModel>(TernModel::open(dir / "m.tern"));
    store = std::make_unique<ExpertStore>(*model);
  }
  const ExpertLayer& layer(size_t i) { return model->manifest().expert_layers[i]; }
  uint64_t stride() { return layer(0).stride; }

  TempDir dir;
  std::unique_ptr<TernModel> model;
  std::unique_ptr<ExpertStore> store;
};

TEST_F(ExpertCacheTest, ReturnsTheExpertsBytes) {
  ExpertCache cache(*store, 4 * stride());
  for (int64_t e : {0, 3, 7}) {
    auto h = cache.acquire(layer(1), e);
    std::string want(layer(1).record_size, '\0');
    model->read_expert(layer(1), e, want.data());
    EXPECT_EQ(std::memcmp(h.data(), want.data(), want.size()), 0) << e;
  }
}

TEST_F(ExpertCacheTest, EvictsLeastRecentlyUsedUnderBudget) {
  ExpertCache cache(*store, 3 * stride());
  for (int64_t e : {0, 1, 2}) cache.acquire(layer(0), e);
  cache.acquire(layer(0), 0);  // 0 becomes most recent; 1 is now least recent
  cache.acquire(layer(0), 3);  // evicts 1
  EXPECT_TRUE(cache.contains(0, 0));
  EXPECT_FALSE(cache.contains(0, 1));
  EXPECT_TRUE(cache.contains(0, 2));
  EXPECT_TRUE(cache.contains(0, 3));
  EXPECT_LE(cache.used_bytes(), cache.budget());
  ExpertCacheStats s = cache.stats();
  EXPECT_EQ(s.lookups, 5u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.bytes_read, 4 * stride());
}

TEST_F(ExpertCacheTest, NeverEvictsAnExpertInUse) {
  ExpertCache cache(*store, 2 * stride());
  auto a = cache.acquire(layer(0), 0);  // least recent, but pinned
  cache.acquire(layer(0), 1);
  auto c = cache.acquire(layer(0), 2);  // must evict 1, not 0
  EXPECT_TRUE(cache.contains(0, 0));
  EXPECT_FALSE(cache.contains(0, 1));
  // Both slots pinned: a third expert cannot be placed.
  expect_error([&] { cache.acquire(layer(1), 5); }, {"expert cache full", "--ram must be at least"});
  c = ExpertCache::Handle();
  EXPECT_NO_THROW(cache.acquire(layer(1), 5));
}

TEST_F(ExpertCacheTest, MinimumBudgetIsTopKOfTheWidestLayer) {
  EXPECT_EQ(ExpertCache::minimum_budget(model->manifest(), 2), 2 * stride());
}

TEST_F(ExpertCacheTest, CorruptExpertIsDetectedOnRead) {
  testing::corrupt_byte(dir / "m.tern" / "experts.bin", layer(1).expert_offset(4) + 1);
  ExpertCache cache(*store, 4 * stride());
  expect_error([&] { cache.acquire(layer(1), 4); }, {"expert (layer 1, expert 4)", "checksum mismatch"});
  EXPECT_FALSE(cache.contains(1, 4));
  EXPECT_EQ(cache.used_bytes(), 0u);
  EXPECT_NO_THROW(cache.acquire(layer(1), 3));
}

TEST_F(ExpertCacheTest, ReadErrorIsClearAndLosesNothing) {
  // The file shrinks under a running engine (disk error stand-in).
  std::filesystem::resize_file(dir / "m.tern" / "experts.bin", layer(1).expert_offset(2));
  ExpertCache cache(*store, 4 * stride());
  EXPECT_NO_THROW(cache.acquire(layer(0), 1));
  expect_error([&] { cache.acquire(layer(1), 6); }, {"expert (layer 1, expert 6)", "end of file"});
  EXPECT_TRUE(cache.contains(0, 1));
  EXPECT_FALSE(cache.contains(1, 6));
}

TEST_F(ExpertCacheTest, BufferedAndDirectReadsAgree) {
  ExpertStoreOptions opt;
  opt.direct_io = false;
  ExpertStore buffered(*model, opt);
  ExpertCache a(*store, 2 * stride()), b(buffered, 2 * stride());
  auto ha = a.acquire(layer(1), 7);
  auto hb = b.acquire(layer(1), 7);
  EXPECT_EQ(std::memcmp(ha.data(), hb.data(), layer(1).record_size), 0);
}

}  // namespace
}  // namespace tern
