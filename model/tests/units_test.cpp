#include "model/units.h"

#include <gtest/gtest.h>

#include "model/errors.h"

namespace kvsim::model {
namespace {

TEST(Units, ParsesSizesBinaryAndDecimal) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("16K"), 16u * 1024);
  EXPECT_EQ(parse_bytes("2MiB"), 2u * 1024 * 1024);
  EXPECT_EQ(parse_bytes("64GiB"), 64ull << 30);
  EXPECT_EQ(parse_bytes("141GB"), 141'000'000'000ull);
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536u);
}

TEST(Units, ParsesRatesInBytesAndBits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("56GB/s"), 56e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("200Gb/s"), 25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps"), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.6TB/s"), 1.6e12);
}

TEST(Units, ParsesTimesToPicoseconds) {
  EXPECT_EQ(parse_time("1.5us"), 1'500'000u);
  EXPECT_EQ(parse_time("300ns"), 300'000u);
  EXPECT_EQ(parse_time("2ms"), 2 * kMs);
  EXPECT_EQ(parse_time("7ps"), 7u);
}

TEST(Units, RejectsMissingOrUnknownUnitsNamingTheText) {
  for (const char* bad : {"56", "56GB", "x GB/s", "-1GB/s", "0GB/s"}) {
    try {
      parse_bandwidth(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ModelError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("bandwidth"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_bytes("12 parsecs"), ModelError);
  EXPECT_THROW(parse_time("5"), ModelError);
  // Bounded, so that no time and no sum of a few times wraps 64-bit picoseconds.
  EXPECT_EQ(parse_time("1000000s"), kMaxTime);
  EXPECT_THROW(parse_time("1000001s"), ModelError);
  EXPECT_THROW(parse_time("1e30s"), ModelError);
}

TEST(Units, TransferTimeRoundsUpToThePicosecond) {
  EXPECT_EQ(transfer_time(1e9, 1e9), kSec);
  EXPECT_EQ(transfer_time(1, 3e12), 1u);  // a third of a picosecond still takes one
  EXPECT_EQ(transfer_time(0, 1e9), 0u);
}

}  // namespace
}  // namespace kvsim::model
