// Byte geometry of §3.4: descriptors applied to simulated memories must move exactly the bytes
// the spec defines, leave every other destination byte untouched, and B2B must post one
// descriptor per maximal run.
#include "impl/copy_geometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "impl/tests/expect_error.h"
#include "impl/validation.h"

namespace kvsim::impl {
namespace {

using testing::RaisesParamInvalid;

constexpr std::uint64_t kSrcBase = 0x10000000;
constexpr std::uint64_t kDstBase = 0x80000000;
constexpr std::uint64_t kRegionStride = 0x100000;
constexpr std::uint64_t kGuard = 64;  // bytes before each destination address

std::uint8_t pattern(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x);
}

// Byte-addressed memory made of disjoint regions; every access must stay inside one region.
class SimMemory {
 public:
  void add_region(std::uint64_t base, std::uint64_t size, std::uint64_t seed) {
    std::vector<std::uint8_t> bytes(size);
    for (std::uint64_t i = 0; i < size; ++i) bytes[i] = pattern(seed, i);
    regions_[base] = std::move(bytes);
  }
  std::uint8_t* at(std::uint64_t addr, std::uint64_t len) {
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return nullptr;
    --it;
    if (addr + len > it->first + it->second.size()) return nullptr;
    return it->second.data() + (addr - it->first);
  }
  std::uint8_t byte(std::uint64_t addr) { return *at(addr, 1); }
  void set(std::uint64_t addr, std::uint8_t value) { *at(addr, 1) = value; }
  bool operator==(const SimMemory& other) const { return regions_ == other.regions_; }

  // Reports the first differing byte of two memories with the same regions.
  std::string first_difference(const SimMemory& other) const {
    for (const auto& [base, bytes] : regions_) {
      const auto& theirs = other.regions_.at(base);
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] != theirs[i]) {
          return "byte at 0x" + to_hex(base + i) + ": " + std::to_string(bytes[i]) + " vs " +
                 std::to_string(theirs[i]);
        }
      }
    }
    return "none";
  }

 private:
  static std::string to_hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::map<std::uint64_t, std::vector<std::uint8_t>> regions_;
};

// Applies descriptors as one-sided puts from `src` to `dst`.
void apply(SimMemory& src, SimMemory& dst, const std::vector<CopyDescriptor>& descs) {
  for (const CopyDescriptor& d : descs) {
    const std::uint8_t* from = src.at(d.src_addr, d.length);
    std::uint8_t* to = dst.at(d.dst_addr, d.length);
    ASSERT_NE(from, nullptr) << "source range outside any region";
    ASSERT_NE(to, nullptr) << "destination range outside any region";
    std::copy(from, from + d.length, to);
  }
}

// A source cache in memory: tensor t at kSrcBase + t * kRegionStride.
struct SourceCache {
  CacheView view;
  CacheGeometry geometry;
  SimMemory memory;
};

SourceCache make_source(std::uint32_t num_tensors, std::vector<std::int64_t> shape,
                        bool is_blocks) {
  std::vector<std::uint64_t> addrs;
  for (std::uint32_t t = 0; t < num_tensors; ++t) addrs.push_back(kSrcBase + t * kRegionStride);
  SourceCache s{
      CacheView{1, CacheDesc(num_tensors, std::move(shape), DataType::DT_INT8), addrs, is_blocks},
      {},
      {}};
  s.geometry = make_cache_geometry(s.view);
  for (std::uint32_t t = 0; t < num_tensors; ++t) {
    s.memory.add_region(addrs[t], s.geometry.tensor_size, 1000 + t);
  }
  return s;
}

// Destination tensors: region i at kDstBase + i * kRegionStride, the tensor kGuard bytes in.
std::vector<std::uint64_t> make_destination(SimMemory& dst, std::size_t count,
                                            std::uint64_t bytes) {
  std::vector<std::uint64_t> addrs;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t base = kDstBase + i * kRegionStride;
    dst.add_region(base, bytes + 2 * kGuard, 5000 + i);
    addrs.push_back(base + kGuard);
  }
  return addrs;
}

std::size_t count_runs(const std::vector<std::uint64_t>& s, const std::vector<std::uint64_t>& d) {
  std::size_t runs = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 0 || s[i] != s[i - 1] + 1 || d[i] != d[i - 1] + 1) ++runs;
  }
  return runs;
}

TEST(Geometry, ContiguousAndBlocksCaches) {
  const CacheGeometry c = make_cache_geometry(
      CacheView{1, CacheDesc(80, {4, 256}, DataType::DT_FLOAT16), {}, false, true});
  EXPECT_EQ(c.tensor_size, 2048u);
  EXPECT_EQ(c.batch_size, 4u);
  EXPECT_EQ(c.num_blocks, 0u);
  EXPECT_EQ(c.stride, 512u);
  EXPECT_TRUE(c.remote_accessible);
  const CacheGeometry b =
      make_cache_geometry(CacheView{2, CacheDesc(80, {16, 128, 8}, DataType::DT_BF16), {}, true});
  EXPECT_EQ(b.tensor_size, 32768u);
  EXPECT_EQ(b.batch_size, 1u);
  EXPECT_EQ(b.num_blocks, 16u);
  EXPECT_EQ(b.stride, 2048u);
  const CacheGeometry dim1 = make_cache_geometry(
      CacheView{3, CacheDesc(2, {3, 5, 7}, DataType::DT_INT8, Placement::DEVICE, 1), {}, false});
  EXPECT_EQ(dim1.batch_size, 5u);
  EXPECT_EQ(dim1.stride, 21u);
}

TEST(Geometry, ModeFollowsBlockLists) {
  EXPECT_EQ(copy_mode({}, {}), CopyMode::kC2C);
  EXPECT_EQ(copy_mode({1}, {}), CopyMode::kC2C);
  EXPECT_EQ(copy_mode({}, {1}), CopyMode::kC2B);
  EXPECT_EQ(copy_mode({1}, {1}), CopyMode::kB2B);
  EXPECT_EQ(to_string(CopyMode::kB2B), "B2B");
}

TEST(Geometry, BlockRunsAreMaximalPlusOnePlusOneRuns) {
  const std::vector<BlockRun> runs = find_block_runs({0, 1, 2, 7, 8, 3, 4}, {4, 5, 6, 9, 10, 0, 2});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].src_start, 0u);
  EXPECT_EQ(runs[0].dst_start, 4u);
  EXPECT_EQ(runs[0].length, 3u);
  EXPECT_EQ(runs[1].src_start, 7u);
  EXPECT_EQ(runs[1].length, 2u);
  EXPECT_EQ(runs[2].length, 1u);  // 3→0, then 4→2 breaks: dst steps by 2
  EXPECT_EQ(runs[3].src_start, 4u);
  EXPECT_EQ(runs[3].dst_start, 2u);
  EXPECT_TRUE(find_block_runs({}, {}).empty());
  EXPECT_TRUE(RaisesParamInvalid([] { find_block_runs({1, 2}, {1}); }, "dst_block_indices"));
}

// --- layer preconditions ---

TEST(LayerPreconditions, ChecksInLibraryOrder) {
  const SourceCache s = make_source(6, {4, 6}, false);
  LayerTransfer t{0, 2, {kDstBase, kDstBase + 64}};
  t.tensor_num_per_layer = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "tensor_num_per_layer"));
  t.tensor_num_per_layer = 2;
  t.layer_index = 3;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "layer_index",
                                 "out of range [0, 3)"));
  t.layer_index = 0;
  t.tensor_num_per_layer = 4;  // 6 tensors are not a multiple of 4
  t.dst_addrs = {1, 2, 3, 4};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "src_cache", "not a multiple"));
  t.tensor_num_per_layer = 2;
  t.dst_addrs = {1, 2, 3};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_addrs", "expected 2"));
}

// --- C2C ---

TEST(C2C, MovesOneRowPerTensorByteExact) {
  SourceCache s = make_source(6, {4, 6}, false);  // 3 layers, batch 4, stride 6
  for (std::uint64_t layer = 0; layer < 3; ++layer) {
    for (std::uint64_t batch = 0; batch < 4; ++batch) {
      SimMemory dst;
      const std::vector<std::uint64_t> dst_addrs = make_destination(dst, 2, 6);
      SimMemory expected = dst;
      for (std::uint64_t i = 0; i < 2; ++i) {
        const std::uint64_t tensor = s.geometry.tensor_addrs[layer * 2 + i];
        for (std::uint64_t k = 0; k < 6; ++k) {
          expected.set(dst_addrs[i] + k, s.memory.byte(tensor + batch * 6 + k));
        }
      }
      const auto descs = plan_layer_copy(s.geometry, LayerTransfer{layer, 2, dst_addrs, batch});
      ASSERT_EQ(descs.size(), 2u);
      EXPECT_EQ(descs[0].src_addr, s.geometry.tensor_addrs[layer * 2] + batch * 6);  // K first
      EXPECT_EQ(descs[1].src_addr, s.geometry.tensor_addrs[layer * 2 + 1] + batch * 6);
      apply(s.memory, dst, descs);
      EXPECT_TRUE(dst == expected)
          << "layer " << layer << " batch " << batch << ": " << dst.first_difference(expected);
    }
  }
}

TEST(C2C, BatchIndexMustBeInRange) {
  const SourceCache s = make_source(2, {4, 6}, false);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        plan_layer_copy(s.geometry, LayerTransfer{0, 2, {1, 2}, 4});
      },
      "src_batch_index", "out of range [0, 4)"));
}

// --- C2B ---

struct C2BCase {
  std::vector<std::int64_t> shape;
  std::uint64_t batch;
  std::uint64_t bms;
  std::vector<std::uint64_t> dst_blocks;
};

// Expected bytes from the definition, walking the source bytes that are sent: byte p of the
// row goes to piece p / bms, which lands in dst_blocks[p / bms]; the last listed block carries
// only tensor_size % bms bytes when that is non-zero.
void check_c2b(const C2BCase& c) {
  SourceCache s = make_source(4, c.shape, false);
  const std::uint64_t tensor = s.geometry.tensor_size;
  const std::uint64_t rem = tensor % c.bms;
  const std::uint64_t n = c.dst_blocks.size();
  const std::uint64_t sent = (n - 1) * c.bms + (rem > 0 ? rem : c.bms);
  const std::uint64_t max_block = *std::max_element(c.dst_blocks.begin(), c.dst_blocks.end());
  for (std::uint64_t layer = 0; layer < 2; ++layer) {
    SimMemory dst;
    const std::vector<std::uint64_t> dst_addrs = make_destination(dst, 2, (max_block + 1) * c.bms);
    SimMemory expected = dst;
    for (std::uint64_t i = 0; i < 2; ++i) {
      const std::uint64_t row =
          s.geometry.tensor_addrs[layer * 2 + i] + c.batch * s.geometry.stride;
      for (std::uint64_t p = 0; p < sent; ++p) {
        const std::uint64_t to = dst_addrs[i] + c.dst_blocks[p / c.bms] * c.bms + p % c.bms;
        expected.set(to, s.memory.byte(row + p));
      }
    }
    LayerTransfer t{layer, 2, dst_addrs, c.batch};
    t.dst_blocks = c.dst_blocks;
    t.dst_block_memory_size = c.bms;
    const auto descs = plan_layer_copy(s.geometry, t);
    EXPECT_EQ(descs.size(), 2 * n);
    apply(s.memory, dst, descs);
    EXPECT_TRUE(dst == expected) << dst.first_difference(expected);
  }
}

TEST(C2B, ExactDivisionFillsEveryBlock) {
  check_c2b({{1, 24}, 0, 6, {3, 0, 2, 1}});
}

TEST(C2B, LastBlockSendsTheRemainder) {
  check_c2b({{1, 24}, 0, 5, {7, 2, 9, 0, 4}});
  const SourceCache s = make_source(2, {1, 24}, false);
  LayerTransfer t{0, 2, {kDstBase, kDstBase + 0x1000}};
  t.dst_blocks = {7, 2, 9, 0, 4};
  t.dst_block_memory_size = 5;
  const auto descs = plan_layer_copy(s.geometry, t);
  ASSERT_EQ(descs.size(), 10u);
  for (std::size_t j = 0; j < 5; ++j) {
    EXPECT_EQ(descs[j].length, j == 4 ? 4u : 5u);
    EXPECT_EQ(descs[j].src_addr, s.geometry.tensor_addrs[0] + j * 5);
    EXPECT_EQ(descs[j].dst_addr, kDstBase + t.dst_blocks[j] * 5);
  }
}

TEST(C2B, FewerBlocksThanPiecesStillSendsRemainderLast) {
  // The library truncates the last *listed* block to the remainder (§3.4).
  check_c2b({{1, 24}, 0, 5, {3, 1}});
  const SourceCache s = make_source(2, {1, 24}, false);
  LayerTransfer t{0, 2, {kDstBase, kDstBase + 0x1000}};
  t.dst_blocks = {3, 1};
  t.dst_block_memory_size = 5;
  const auto descs = plan_layer_copy(s.geometry, t);
  EXPECT_EQ(descs[0].length, 5u);
  EXPECT_EQ(descs[1].length, 4u);
}

TEST(C2B, BatchRowOffsetsTheSource) {
  check_c2b({{2, 12}, 1, 4, {5, 0, 3}});
}

TEST(C2B, BlockSizeMustBePositiveAndBelowTensorSize) {
  const SourceCache s = make_source(2, {1, 24}, false);
  LayerTransfer t{0, 2, {1, 2}};
  t.dst_blocks = {0};
  t.dst_block_memory_size = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_block_memory_size",
                                 "must be > 0 and < tensor size 24"));
  t.dst_block_memory_size = 24;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_block_memory_size"));
}

TEST(C2B, BatchIndexMustBeInRange) {
  const SourceCache s = make_source(2, {2, 12}, false);
  LayerTransfer t{0, 2, {1, 2}, 2};
  t.dst_blocks = {0};
  t.dst_block_memory_size = 4;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "src_batch_index",
                                 "out of range [0, 2)"));
}

TEST(C2B, AtMostCeilTensorSizeOverBlockSizeBlocks) {
  const SourceCache s = make_source(2, {1, 24}, false);
  LayerTransfer t{0, 2, {1, 2}};
  t.dst_blocks = {0, 1, 2, 3, 4, 5};
  t.dst_block_memory_size = 5;  // ceil(24 / 5) = 5 pieces
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_block_indices",
                                 "6 blocks exceed the 5 pieces"));
}

TEST(C2B, ARowOtherThanZeroMustNotReadPastTheTensor) {
  const SourceCache s = make_source(2, {2, 12}, false);
  LayerTransfer t{0, 2, {1, 2}, 1};
  t.dst_blocks = {0, 1, 2, 3};
  t.dst_block_memory_size = 4;  // row 1 starts at 12; 16 bytes would end at 28 > 24
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "src_batch_index",
                                 "past the source tensor"));
}

// --- B2B ---

TEST(B2B, OneDescriptorPerRunWithExactAddresses) {
  const SourceCache s = make_source(4, {16, 8}, true);  // 16 blocks of 8 bytes
  LayerTransfer t{1, 2, {kDstBase, kDstBase + 0x1000}};
  t.src_blocks = {0, 1, 2, 7, 8, 3};
  t.dst_blocks = {4, 5, 6, 9, 10, 0};
  const auto descs = plan_layer_copy(s.geometry, t);
  const std::uint64_t k = s.geometry.tensor_addrs[2];
  const std::uint64_t v = s.geometry.tensor_addrs[3];
  const std::vector<CopyDescriptor> expected = {
      {k + 0, kDstBase + 32, 24},
      {k + 56, kDstBase + 72, 16},
      {k + 24, kDstBase + 0, 8},
      {v + 0, kDstBase + 0x1000 + 32, 24},
      {v + 56, kDstBase + 0x1000 + 72, 16},
      {v + 24, kDstBase + 0x1000 + 0, 8},
  };
  EXPECT_EQ(descs, expected);
}

// Random block maps built from shuffled runs; expected bytes are filled pair by pair.
TEST(B2B, RandomMapsAreByteExactAndPostOneDescriptorPerRun) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const std::int64_t src_blocks_total = 24;
    const std::uint64_t dst_blocks_total = 40;
    const std::uint64_t block_bytes = 8 + seed % 3;
    SourceCache s =
        make_source(6, {src_blocks_total, static_cast<std::int64_t>(block_bytes)}, true);
    // Destination: consecutive chunks of 1..5 blocks in shuffled order, each from a random
    // source start; pairs are therefore distinct on the destination side.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;  // (dst_start, length)
    for (std::uint64_t d = 0; d < dst_blocks_total;) {
      const std::uint64_t len = std::min<std::uint64_t>(1 + rng() % 5, dst_blocks_total - d);
      chunks.emplace_back(d, len);
      d += len;
    }
    std::shuffle(chunks.begin(), chunks.end(), rng);
    chunks.resize(chunks.size() - rng() % 3);
    std::vector<std::uint64_t> src_list, dst_list;
    for (const auto& [d0, len] : chunks) {
      const std::uint64_t s0 = rng() % (static_cast<std::uint64_t>(src_blocks_total) - len + 1);
      for (std::uint64_t j = 0; j < len; ++j) {
        src_list.push_back(s0 + j);
        dst_list.push_back(d0 + j);
      }
    }
    const std::uint64_t layer = seed % 3;
    SimMemory dst;
    const std::vector<std::uint64_t> dst_addrs =
        make_destination(dst, 2, dst_blocks_total * block_bytes);
    SimMemory expected = dst;
    for (std::uint64_t i = 0; i < 2; ++i) {
      const std::uint64_t tensor = s.geometry.tensor_addrs[layer * 2 + i];
      for (std::size_t p = 0; p < src_list.size(); ++p) {
        for (std::uint64_t b = 0; b < block_bytes; ++b) {
          expected.set(dst_addrs[i] + dst_list[p] * block_bytes + b,
                       s.memory.byte(tensor + src_list[p] * block_bytes + b));
        }
      }
    }
    LayerTransfer t{layer, 2, dst_addrs};
    t.src_blocks = src_list;
    t.dst_blocks = dst_list;
    t.dst_block_memory_size = seed % 2 == 0 ? block_bytes : 0;  // None and stride are equal
    const auto descs = plan_layer_copy(s.geometry, t);
    EXPECT_EQ(descs.size(), 2 * count_runs(src_list, dst_list)) << "seed " << seed;
    apply(s.memory, dst, descs);
    EXPECT_TRUE(dst == expected) << "seed " << seed << ": " << dst.first_difference(expected);
  }
}

TEST(B2B, BlockSizeMustEqualSourceStrideIfSet) {
  const SourceCache s = make_source(2, {16, 8}, true);
  LayerTransfer t{0, 2, {1, 2}};
  t.src_blocks = {0};
  t.dst_blocks = {0};
  t.dst_block_memory_size = 16;
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_block_memory_size",
                                 "source block size 8"));
  t.dst_block_memory_size = 8;
  EXPECT_NO_THROW(plan_layer_copy(s.geometry, t));
}

TEST(B2B, SourceBlocksMustExist) {
  const SourceCache s = make_source(2, {16, 8}, true);
  LayerTransfer t{0, 2, {1, 2}};
  t.src_blocks = {14, 15, 16};
  t.dst_blocks = {0, 1, 2};
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "src_block_indices",
                                 "block 16 out of range [0, 16)"));
}

TEST(B2B, DestinationBlocksAreNotCheckedOutsideRemoteMode) {
  const SourceCache s = make_source(2, {16, 8}, true);
  LayerTransfer t{0, 2, {kDstBase, kDstBase + 0x100000}};
  t.src_blocks = {3};
  t.dst_blocks = {1000};
  const auto descs = plan_layer_copy(s.geometry, t);
  EXPECT_EQ(descs[0].dst_addr, kDstBase + 8000);
}

TEST(B2B, ListsMustHaveEqualLength) {
  const SourceCache s = make_source(2, {16, 8}, true);
  LayerTransfer t{0, 2, {1, 2}};
  t.src_blocks = {0, 1};
  t.dst_blocks = {0};
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "dst_block_indices"));
}

TEST(B2B, SourceMustBeABlocksCache) {
  const SourceCache s = make_source(2, {4, 8}, false);
  LayerTransfer t{0, 2, {1, 2}};
  t.src_blocks = {0};
  t.dst_blocks = {0};
  EXPECT_TRUE(RaisesParamInvalid([&] { plan_layer_copy(s.geometry, t); }, "src_cache",
                                 "not a blocks cache"));
}

// --- remote-accessible destinations ---

class RemoteTarget : public ::testing::Test {
 protected:
  CacheGeometry local_ = make_cache_geometry(
      CacheView{1, CacheDesc(4, {4, 8}, DataType::DT_INT8), {10, 20, 30, 40}, false, true});
  CacheGeometry remote_c_ = make_cache_geometry(CacheView{
      9, CacheDesc(6, {3, 8}, DataType::DT_INT8), {100, 200, 300, 400, 500, 600}, false, true});
  CacheGeometry remote_b_ = make_cache_geometry(CacheView{
      9, CacheDesc(4, {12, 16}, DataType::DT_INT8), {1000, 2000, 3000, 4000}, true, true});
};

TEST_F(RemoteTarget, AddressesAreRemoteTensorsPlusRowOffset) {
  EXPECT_EQ(resolve_remote_dst_addrs(local_, remote_c_, {2, 1}),
            (std::vector<std::uint64_t>{500 + 8, 600 + 8}));
  RemoteLayerTarget blocks{1, 0};
  blocks.dst_blocks = {11, 0};
  blocks.dst_block_memory_size = 16;
  EXPECT_EQ(resolve_remote_dst_addrs(local_, remote_b_, blocks),
            (std::vector<std::uint64_t>{3000, 4000}));
}

TEST_F(RemoteTarget, LocalCacheMustBeRemoteAccessible) {
  local_.remote_accessible = false;
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        resolve_remote_dst_addrs(local_, remote_c_, {0, 0});
      },
      "src_cache", "local cache"));
}

TEST_F(RemoteTarget, RemoteCacheMustBeRemoteAccessible) {
  remote_c_.remote_accessible = false;
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        resolve_remote_dst_addrs(local_, remote_c_, {0, 0});
      },
      "cache_key", "remote cache"));
}

TEST_F(RemoteTarget, DstLayerMustExistRemotely) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        resolve_remote_dst_addrs(local_, remote_c_, {3, 0});
      },
      "dst_layer_range", "out of range [0, 3)"));
}

TEST_F(RemoteTarget, C2CRowMustExistRemotely) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        resolve_remote_dst_addrs(local_, remote_c_, {0, 3});
      },
      "cache_key.batch_index", "out of range [0, 3)"));
}

TEST_F(RemoteTarget, DstBlocksMustExistRemotely) {
  RemoteLayerTarget t{0, 0};
  t.dst_blocks = {3, 12};
  EXPECT_TRUE(RaisesParamInvalid([&] { resolve_remote_dst_addrs(local_, remote_b_, t); },
                                 "dst_block_indices", "block 12 out of range [0, 12)"));
}

TEST_F(RemoteTarget, BlockSizeMustBeNoneOrRemoteStride) {
  RemoteLayerTarget t{0, 0};
  t.dst_blocks = {3};
  t.dst_block_memory_size = 8;
  EXPECT_TRUE(RaisesParamInvalid([&] { resolve_remote_dst_addrs(local_, remote_b_, t); },
                                 "dst_block_memory_size", "block size 16"));
  t.dst_block_memory_size = 0;
  EXPECT_NO_THROW(resolve_remote_dst_addrs(local_, remote_b_, t));
}

// --- validated call to bytes ---

TEST(EndToEnd, ValidatedB2BConfigMovesEveryCoveredLayer) {
  SourceCache s = make_source(8, {8, 4}, true);  // 4 layers, 8 blocks of 4 bytes
  SimMemory dst;
  const std::vector<std::uint64_t> dst_addrs = make_destination(dst, 4, 16 * 4);
  std::vector<AnyTransferConfig> configs{TransferConfig(3, dst_addrs, LayerRange{1, 3})};
  TransferCacheArgs args;
  args.src_cache = &s.view;
  args.has_layer_synchronizer = true;
  args.transfer_configs = &configs;
  args.src_block_indices = std::vector<std::int64_t>{6, 7, 2};
  args.dst_block_indices = std::vector<std::int64_t>{0, 1, 15};
  const TransferCachePlan plan = validate_transfer_cache_async(args, TransferCacheEnv{});
  SimMemory expected = dst;
  const std::vector<std::uint64_t> src_list{6, 7, 2}, dst_list{0, 1, 15};
  for (std::uint64_t layer = 1; layer < 3; ++layer) {
    for (std::uint64_t i = 0; i < 2; ++i) {
      const std::uint64_t tensor = s.geometry.tensor_addrs[layer * 2 + i];
      const std::uint64_t to = dst_addrs[(layer - 1) * 2 + i];
      for (std::size_t p = 0; p < 3; ++p) {
        for (std::uint64_t b = 0; b < 4; ++b) {
          expected.set(to + dst_list[p] * 4 + b, s.memory.byte(tensor + src_list[p] * 4 + b));
        }
      }
    }
    const LayerTransfer t = make_layer_transfer(plan, std::get<TransferConfig>(configs[0]),
                                                static_cast<std::int64_t>(layer));
    apply(s.memory, dst, plan_layer_copy(s.geometry, t));
  }
  EXPECT_TRUE(dst == expected) << dst.first_difference(expected);
}

}  // namespace
}  // namespace kvsim::impl
