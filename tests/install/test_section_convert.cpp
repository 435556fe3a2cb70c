// FP8 rows as `tern install` converts them (section_convert.h): E4M3
// decoding, and rows that start past the first block of rows (the trunk's
// jobs of whole row blocks) reading the scale rows of their own blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "support/expect_error.h"
#include "tern/core/thread_pool.h"
#include "tern/install/section_convert.h"

namespace tern {
namespace {

using testing::expect_error;

TEST(Fp8Convert, E4m3ValuesAsTheOcpFormatDefinesThem) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);              // exponent 7 = bias
  EXPECT_EQ(e4m3_to_f32(0xB8), -1.0f);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);            // the largest finite
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_to_f32(0x3D), 1.625f);            // 1 + 5/8
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);            // exponent 15 is finite (no infinities)
}

TEST(Fp8Convert, RowsPastTheFirstBlockUseTheirOwnScaleRows) {
  // A [60, 10] FP8 matrix in blocks of [24, 4]: scales [3, 3]. Convert rows
  // 24..59 (blocks 1 and 2) as a job does, given scale rows 1 and 2 only.
  constexpr int64_t kRows = 60, kCols = 10, kBr = 24, kBc = 4;
  std::vector<uint8_t> codes(kRows * kCols);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37 + 11) % 0x7E);
  std::vector<float> scales(3 * 3);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + static_cast<float>(i);
  ThreadPool pool(2);
  const int64_t first = 24, n = kRows - first;
  Fp8Scales s{reinterpret_cast<const uint8_t*>(scales.data() + 3), TensorFormat::F32, kBr, kBc, first, "w"};
  std::vector<float> out(static_cast<size_t>(n * kCols));
  convert_fp8_rows(codes.data() + first * kCols, s, reinterpret_cast<uint8_t*>(out.data()), TensorFormat::F32, n,
                   kCols, pool);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      const int64_t src = first + r;
      const float want = e4m3_to_f32(codes[src * kCols + c]) * scales[(src / kBr) * 3 + c / kBc];
      ASSERT_EQ(out[r * kCols + c], want) << "row " << src << " column " << c;
    }
  // A NaN is named by its row in the whole tensor.
  codes[(first + 30) * kCols + 7] = 0xFF;
  expect_error([&] {
    convert_fp8_rows(codes.data() + first * kCols, s, reinterpret_cast<uint8_t*>(out.data()), TensorFormat::F32, n,
                     kCols, pool);
  }, {"w: row 54 column 7 is an FP8 NaN (byte 0xff)"});
}

}  // namespace
}  // namespace tern
