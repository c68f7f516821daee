// The happens-before clocks that launched programs' sends and calls carry
// (cpp/wire/vector_clock.h): join, order-independent encoding, and rejection of bad bytes.
#include "cpp/wire/vector_clock.h"

#include <gtest/gtest.h>

#include "cpp/wire/wire.h"

namespace kvsim::cpp::wire {
namespace {

TEST(VectorClock, JoinTakesEachThreadsLargerCount) {
  VectorClock a;
  a.set(5, 3);
  a.set(1, 9);
  VectorClock b;
  b.set(1, 2);
  b.set(7, 4);
  a.join(b);
  EXPECT_EQ(a.get(1), 9U);
  EXPECT_EQ(a.get(5), 3U);
  EXPECT_EQ(a.get(7), 4U);
  EXPECT_EQ(a.get(2), 0U);
}

TEST(VectorClock, EncodingRoundTripsInThreadOrder) {
  VectorClock a;
  a.set(65540, 2);
  a.set(3, 7);
  const std::string bytes = a.encode();
  ASSERT_EQ(bytes.size(), 4U + 2 * 8U);
  EXPECT_EQ(static_cast<unsigned char>(bytes[4]), 3);  // thread 3 first
  const VectorClock back = VectorClock::decode(bytes);
  EXPECT_EQ(back.get(3), 7U);
  EXPECT_EQ(back.get(65540), 2U);
  EXPECT_EQ(back.encode(), bytes);
  EXPECT_TRUE(VectorClock::decode("").empty());
  EXPECT_EQ(VectorClock().encode(), "");
}

TEST(VectorClock, BadBytesAreAWireError) {
  VectorClock a;
  a.set(1, 1);
  a.set(2, 1);
  const std::string bytes = a.encode();
  EXPECT_THROW(VectorClock::decode(bytes.substr(0, bytes.size() - 1)), WireError);
  std::string swapped = bytes;  // threads out of order
  std::swap(swapped[4], swapped[12]);
  EXPECT_THROW(VectorClock::decode(swapped), WireError);
}

}  // namespace
}  // namespace kvsim::cpp::wire
