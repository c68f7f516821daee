#include "model/content_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "model/errors.h"

namespace kvsim::model {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes pattern_bytes(std::uint64_t seed, std::uint64_t stream, std::uint64_t len) {
  Bytes out(len);
  for (std::uint64_t i = 0; i < len; ++i) out[i] = ContentStore::pattern_byte(seed, stream + i);
  return out;
}

std::optional<std::uint64_t> reference_difference(const Bytes& a, std::uint64_t a_addr,
                                                  const Bytes& b, std::uint64_t b_addr,
                                                  std::uint64_t len) {
  for (std::uint64_t i = 0; i < len; ++i) {
    if (a[a_addr + i] != b[b_addr + i]) return i;
  }
  return std::nullopt;
}

TEST(ContentStoreTest, UnwrittenBytesReadAsDeadByte) {
  ContentStore s;
  EXPECT_EQ(s.read(1000, 16), Bytes(16, ContentStore::kUnwrittenByte));
  EXPECT_EQ(s.extent_count(), 0u);
  EXPECT_EQ(s.literal_bytes(), 0u);
}

TEST(ContentStoreTest, PatternIsDeterministicAndWellMixed) {
  // Bulk reads (word at a time) agree with pattern_byte at every alignment.
  ContentStore s;
  s.fill_pattern(0, 4096, 42);
  for (std::uint64_t start : {0u, 1u, 3u, 7u, 8u, 13u}) {
    EXPECT_EQ(s.read(start, 1000), pattern_bytes(42, start, 1000)) << start;
  }
  // Different seeds (even adjacent ones) and different offsets give different streams.
  std::set<Bytes> streams;
  for (std::uint64_t seed = 0; seed < 64; ++seed) streams.insert(pattern_bytes(seed, 0, 32));
  for (std::uint64_t off = 1; off < 64; ++off) streams.insert(pattern_bytes(0, off * 8, 32));
  EXPECT_EQ(streams.size(), 127u);
  // Roughly uniform bytes: each value appears 256 times on average in 64 KiB.
  std::vector<int> histogram(256);
  for (std::uint8_t b : pattern_bytes(7, 0, 1 << 16)) ++histogram[b];
  for (int count : histogram) {
    EXPECT_GT(count, 170);
    EXPECT_LT(count, 350);
  }
}

TEST(ContentStoreTest, WriteFillClearRoundTrip) {
  ContentStore s;
  const Bytes data = {1, 2, 3, 4, 5, 6, 7, 8};
  s.write(10, data.data(), data.size());
  s.fill(14, 2, 0xAA);
  s.clear(11, 1);
  EXPECT_EQ(s.read(9, 10), (Bytes{0xDB, 1, 0xDB, 3, 4, 0xAA, 0xAA, 7, 8, 0xDB}));
  s.fill(0, 0, 1);  // zero length: no-op
  s.write(0, nullptr, 0);
  EXPECT_EQ(s.read(0, 1), Bytes{0xDB});
}

// has_content is what lets the Fabric skip copies: it must see any written byte in the range,
// and none outside it.
TEST(ContentStoreTest, HasContentSeesExactlyTheWrittenBytesOfARange) {
  ContentStore s;
  EXPECT_FALSE(s.has_content(0, 1 << 20));  // empty store
  s.fill_pattern(100, 50, 1);               // [100, 150)
  s.fill(300, 10, 7);                       // [300, 310), one repeated byte
  EXPECT_TRUE(s.has_content(100, 1));
  EXPECT_TRUE(s.has_content(149, 1));      // the last byte
  EXPECT_TRUE(s.has_content(120, 500));    // starts inside an extent
  EXPECT_TRUE(s.has_content(0, 101));      // ends on the first byte
  EXPECT_FALSE(s.has_content(0, 100));     // ends just before it
  EXPECT_FALSE(s.has_content(150, 150));   // the gap between the two
  EXPECT_TRUE(s.has_content(150, 151));    // the gap and the second's first byte
  EXPECT_FALSE(s.has_content(310, 1000));  // past the last
  EXPECT_FALSE(s.has_content(120, 0));     // zero length
  s.clear(100, 50);
  EXPECT_FALSE(s.has_content(0, 300));  // cleared bytes read as unwritten again
}

TEST(ContentStoreTest, RangePastAddressSpaceThrows) {
  ContentStore s;
  const std::uint64_t top = ~0ull - 10;
  s.fill(top, 10, 1);  // ends at 2^64-1: allowed
  try {
    s.fill(top, 11, 2);
    FAIL() << "expected ModelError";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfRange);
    EXPECT_NE(std::string(e.what()).find("0xfffffffffffffff5"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.read(top, 10), Bytes(10, 1));
  ContentStore other;
  EXPECT_THROW(other.copy_from(s, top, 0, 11), ModelError);
  EXPECT_THROW(s.first_difference(top, other, 0, 11), ModelError);
  EXPECT_EQ(other.extent_count(), 0u);
}

TEST(ContentStoreTest, CopySharesLiteralBuffers) {
  ContentStore s;
  Bytes data(100);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
  s.write(0, data.data(), data.size());
  s.copy_from(s, 0, 1000, 100);
  ContentStore other;
  other.copy_from(s, 0, 0, 100);
  other.copy_from(s, 20, 500, 50);
  EXPECT_EQ(s.literal_bytes(), 100u);  // the copy shares the buffer: counted once
  EXPECT_EQ(other.literal_bytes(), 100u);
  EXPECT_EQ(other.read(500, 50), Bytes(data.begin() + 20, data.begin() + 70));
  s.fill(0, 50, 0);  // the copy at 1000 still references the whole buffer
  EXPECT_EQ(s.literal_bytes(), 100u);
  s.clear(1000, 30);
  EXPECT_EQ(s.literal_bytes(), 70u);
  EXPECT_EQ(s.first_difference(1030, other, 30, 70), std::nullopt);
}

TEST(ContentStoreTest, OverlappingSelfCopyIsMemmove) {
  for (std::int64_t shift : {-37, -1, 1, 5, 37, 200}) {
    ContentStore s;
    Bytes ref(512, ContentStore::kUnwrittenByte);
    const Bytes data = pattern_bytes(3, 0, 100);
    s.fill_pattern(100, 200, 9);
    s.write(150, data.data(), data.size());
    s.fill(260, 20, 0x11);
    std::copy(data.begin(), data.end(), ref.begin() + 150);
    const Bytes p = pattern_bytes(9, 0, 200);
    std::copy(p.begin(), p.begin() + 50, ref.begin() + 100);
    std::copy(p.begin() + 150, p.end(), ref.begin() + 250);
    std::fill(ref.begin() + 260, ref.begin() + 280, 0x11);
    ASSERT_EQ(s.read(0, 512), ref);
    const std::uint64_t dst = static_cast<std::uint64_t>(120 + shift);
    s.copy_from(s, 120, dst, 180);
    std::memmove(ref.data() + dst, ref.data() + 120, 180);
    EXPECT_EQ(s.read(0, 512), ref) << "shift " << shift;
  }
}

TEST(ContentStoreTest, FirstDifferenceFindsEqualContentOfDifferentOrigin) {
  ContentStore a;
  ContentStore b;
  a.fill_pattern(0, 10000, 5);
  const Bytes literal = pattern_bytes(5, 0, 10000);
  b.write(0, literal.data(), literal.size());
  EXPECT_EQ(a.first_difference(0, b, 0, 10000), std::nullopt);
  EXPECT_EQ(a.first_difference(1, b, 0, 9999), std::optional<std::uint64_t>(0));
  b.fill(7777, 1, static_cast<std::uint8_t>(literal[7777] ^ 1));
  EXPECT_EQ(a.first_difference(0, b, 0, 10000), std::optional<std::uint64_t>(7777));
  EXPECT_EQ(b.first_difference(100, a, 100, 9900), std::optional<std::uint64_t>(7677));
  ContentStore c;
  c.fill(0, 100, ContentStore::kUnwrittenByte);  // a fill of the dead byte equals a gap
  EXPECT_EQ(c.first_difference(0, c, 1000, 100), std::nullopt);
}

TEST(ContentStoreTest, RandomOperationsMatchReferenceModel) {
  constexpr std::uint64_t kSpace = 64 * 1024;
  std::mt19937_64 rng(0x6b7673696dULL);
  auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  auto random_len = [&]() -> std::uint64_t {
    switch (uniform(0, 9)) {
      case 0:
        return 0;
      case 1:
      case 2:
      case 3:
        return uniform(1, 64);
      case 4:
      case 5:
      case 6:
        return uniform(1, 4096);
      default:
        return uniform(1, kSpace / 2);
    }
  };
  ContentStore stores[2];
  Bytes refs[2] = {Bytes(kSpace, ContentStore::kUnwrittenByte),
                   Bytes(kSpace, ContentStore::kUnwrittenByte)};
  int cross_copies = 0;
  for (int step = 0; step < 6000; ++step) {
    const int which = static_cast<int>(uniform(0, 1));
    ContentStore& s = stores[which];
    Bytes& ref = refs[which];
    const std::uint64_t len = random_len();
    const std::uint64_t addr = uniform(0, kSpace - len);
    const std::uint64_t op = uniform(0, 9);
    SCOPED_TRACE(::testing::Message() << "step " << step << " op " << op << " store " << which
                                      << " addr " << addr << " len " << len);
    if (op == 0) {  // literal write, sometimes of bytes equal to a pattern stream
      Bytes data(len);
      if (uniform(0, 1)) {
        data = pattern_bytes(uniform(1, 4), uniform(0, 64), len);
      } else {
        for (auto& b : data) b = static_cast<std::uint8_t>(rng());
      }
      s.write(addr, data.data(), len);
      std::copy(data.begin(), data.end(), ref.begin() + addr);
    } else if (op == 1) {
      const std::uint64_t seed = uniform(1, 4);
      s.fill_pattern(addr, len, seed);
      const Bytes p = pattern_bytes(seed, 0, len);
      std::copy(p.begin(), p.end(), ref.begin() + addr);
    } else if (op == 2) {
      static const std::uint8_t kValues[] = {0, 7, 0xFF, ContentStore::kUnwrittenByte};
      const std::uint8_t value = kValues[uniform(0, 3)];
      s.fill(addr, len, value);
      std::fill(ref.begin() + addr, ref.begin() + addr + len, value);
    } else if (op == 3) {
      s.clear(addr, len);
      std::fill(ref.begin() + addr, ref.begin() + addr + len, ContentStore::kUnwrittenByte);
    } else if (op <= 6) {  // copies: often overlapping self-copies, else from the other store
      const bool self = op != 6;
      const ContentStore& src = self ? s : stores[1 - which];
      const Bytes& src_ref = self ? ref : refs[1 - which];
      std::uint64_t dst = uniform(0, kSpace - len);
      if (self && op == 5) {
        const std::uint64_t lo = addr >= 256 ? addr - 256 : 0;
        dst = uniform(lo, std::min(addr + 256, kSpace - len));
      }
      s.copy_from(src, addr, dst, len);
      std::memmove(ref.data() + dst, src_ref.data() + addr, len);
      const auto diff = s.first_difference(dst, src, addr, len);
      EXPECT_EQ(diff, reference_difference(ref, dst, src_ref, addr, len));
      if (!self) ++cross_copies;
    } else if (op == 7) {
      EXPECT_EQ(s.read(addr, len), Bytes(ref.begin() + addr, ref.begin() + addr + len));
    } else if (op == 8) {
      // Same address in both stores, or random addresses.
      const std::uint64_t other_addr = uniform(0, 1) ? addr : uniform(0, kSpace - len);
      EXPECT_EQ(stores[0].first_difference(addr, stores[1], other_addr, len),
                reference_difference(refs[0], addr, refs[1], other_addr, len));
    } else if (uniform(0, 7) == 0) {  // occasionally mirror a whole store
      stores[1 - which].copy_from(s, 0, 0, kSpace);
      refs[1 - which] = ref;
      EXPECT_EQ(stores[1 - which].first_difference(0, s, 0, kSpace), std::nullopt);
    }
    if (step % 500 == 499) {
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(stores[i].read(0, kSpace), refs[i]) << "full check of store " << i;
        EXPECT_LE(stores[i].literal_bytes(), kSpace);
        // Maximally merged: a whole-range copy, which merges every adjacent pair, finds nothing
        // left to merge.
        ContentStore merged;
        merged.copy_from(stores[i], 0, 0, kSpace);
        EXPECT_EQ(merged.extent_count(), stores[i].extent_count()) << "store " << i;
      }
    }
  }
  EXPECT_GT(cross_copies, 100);
}

TEST(ContentStoreTest, BlocksCopiedAgainOverTheSameSlotsTakeTheNewContent) {
  // A block pool reused by later requests: every copy lands exactly on an extent an earlier copy
  // left (the in-place path of put), from a different source each round.
  constexpr std::uint64_t kBlock = 256, kBlocks = 64;
  ContentStore src, dst;
  Bytes ref(kBlocks * kBlock, ContentStore::kUnwrittenByte);
  std::mt19937_64 rng(11);
  for (std::uint64_t round = 1; round <= 4; ++round) {
    src.fill_pattern(0, kBlocks * kBlock, round);
    const Bytes p = pattern_bytes(round, 0, kBlocks * kBlock);
    for (std::uint64_t i = 0; i < kBlocks; ++i) {
      const std::uint64_t from = rng() % kBlocks, to = (i * 37) % kBlocks;  // scattered slots
      dst.copy_from(src, from * kBlock, to * kBlock, kBlock);
      std::copy(p.begin() + static_cast<std::ptrdiff_t>(from * kBlock),
                p.begin() + static_cast<std::ptrdiff_t>((from + 1) * kBlock),
                ref.begin() + static_cast<std::ptrdiff_t>(to * kBlock));
    }
    ASSERT_EQ(dst.read(0, kBlocks * kBlock), ref) << "round " << round;
    EXPECT_LE(dst.extent_count(), kBlocks);
  }
}

TEST(ContentStoreTest, SequentialCopiesCoalesce) {
  constexpr std::uint64_t kLen = 1 << 20;
  ContentStore src;
  src.fill_pattern(0, kLen, 11);
  Bytes literal(65536);
  for (std::size_t i = 0; i < literal.size(); ++i) literal[i] = static_cast<std::uint8_t>(i * 7);
  src.write(kLen, literal.data(), literal.size());
  src.fill(kLen + 65536, 4096, 0x5A);
  ASSERT_EQ(src.extent_count(), 3u);
  const std::uint64_t total = kLen + 65536 + 4096;

  ContentStore forward;
  for (std::uint64_t off = 0; off < total; off += 1000) {
    forward.copy_from(src, off, 1 << 24 | off, std::min<std::uint64_t>(1000, total - off));
  }
  EXPECT_EQ(forward.extent_count(), 3u);
  ContentStore backward;
  for (std::uint64_t off = total; off > 0;) {
    const std::uint64_t n = std::min<std::uint64_t>(333, off);
    off -= n;
    backward.copy_from(src, off, off, n);
  }
  EXPECT_EQ(backward.extent_count(), 3u);
  EXPECT_EQ(backward.first_difference(0, src, 0, total), std::nullopt);
  EXPECT_EQ(forward.first_difference(1 << 24, src, 0, total), std::nullopt);

  // Copying a range onto itself or bouncing it back and forth never fragments it.
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t off = static_cast<std::uint64_t>(i) * 4999 % (total - 5000);
    backward.copy_from(backward, off, off, 5000);
    src.copy_from(backward, off, off, 5000);
    backward.copy_from(src, off, off, 5000);
  }
  EXPECT_EQ(backward.extent_count(), 3u);
  EXPECT_EQ(src.extent_count(), 3u);

  ContentStore fills;
  for (std::uint64_t off = 0; off < 100000; off += 100) fills.fill(off, 100, 3);
  EXPECT_EQ(fills.extent_count(), 1u);
}

TEST(ContentStoreTest, AWriteOfOneRepeatedByteIsKeptAsAFill) {
  ContentStore s;
  const Bytes zeros(1 << 20, 0);
  s.write(4096, zeros.data(), zeros.size());
  EXPECT_EQ(s.literal_bytes(), 0u);  // a zero tensor written from the host costs no buffer
  EXPECT_EQ(s.extent_count(), 1u);
  EXPECT_EQ(s.read(4096, zeros.size()), zeros);
  Bytes almost(1 << 12, 7);
  almost.back() = 8;  // one byte differs: literal
  s.write(0, almost.data(), almost.size());
  EXPECT_EQ(s.literal_bytes(), almost.size());
  EXPECT_EQ(s.read(0, almost.size()), almost);
  const Bytes short_run(ContentStore::kSmallestUniformFill - 1, 0);
  ContentStore t;
  t.write(0, short_run.data(), short_run.size());
  EXPECT_EQ(t.literal_bytes(), short_run.size());
}

}  // namespace
}  // namespace kvsim::model
