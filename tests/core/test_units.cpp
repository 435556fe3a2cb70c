#include <gtest/gtest.h>

#include "tern/core/error.h"
#include "tern/core/units.h"

namespace tern {

TEST(ParseSize, AcceptsBinarySuffixes) {
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("4G"), 4ull << 30);
  EXPECT_EQ(parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("100"), 100u);
  EXPECT_EQ(parse_size("2k"), 2048u);
}

TEST(ParseSize, RejectsGarbageWithMessage) {
  EXPECT_THROW(parse_size("lots"), Error);
  EXPECT_THROW(parse_size("4X"), Error);
  EXPECT_THROW(parse_size("-1G"), Error);
  EXPECT_THROW(parse_size("4GBB"), Error);
  try {
    parse_size("4X");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4X"), std::string::npos);
  }
}

TEST(FormatBytes, PicksUnit) {
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(format_bytes(312ull << 20), "312.0 MiB");
}

}  // namespace tern
