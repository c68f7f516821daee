// Issue 31's "no allocation per flow or chunk on the hot path": once warm, a Fabric posting,
// sending and landing batches (content included) asks the heap for nothing. Its own program,
// because it replaces the global operator new to count.
#include <gtest/gtest.h>

#include <systemc>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "model/fabric.h"
#include "model/preset.h"
#include "model/sim_kernel.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// std::pmr's default resource allocates through the aligned form.
void* operator new(std::size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) ++g_allocations;
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace kvsim::model {
namespace {

constexpr std::size_t kWarm = 2000, kCounted = 2000;

// Keeps `concurrency` batches in flight between device pairs of two A2 nodes (HCCS mesh and
// RoCE) through warm-up and a counted phase; returns the allocations of the counted phase.
std::size_t allocations_when_warm(std::size_t concurrency, std::size_t descriptors_per_batch) {
  fresh_kernel();
  Fabric fabric("fabric", load_preset("atlas-a2", {{"dma.queue_depth", "8"}}));
  Topology& topo = fabric.topology();
  const int devices = topo.device_count();
  std::vector<std::uint64_t> base(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    const std::size_t i = static_cast<std::size_t>(d);
    base[i] = topo.memory(topo.device_memory(d)).allocate(1ull << 30);
    topo.memory(topo.device_memory(d)).fill_pattern(base[i], 1ull << 29, 100 + i);
  }
  // Every batch is built before the run, so that the test itself allocates nothing while counting.
  std::vector<std::vector<CopyDescriptor>> batches(kWarm + kCounted);
  std::vector<int> engine_device(batches.size());
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const int s = static_cast<int>(k % static_cast<std::size_t>(devices));
    const int d = static_cast<int>((k * 7 + 3) % static_cast<std::size_t>(devices - 1));
    const int dst = d >= s ? d + 1 : d;
    engine_device[k] = s;
    const std::size_t slot = k % 32;  // the same slots again: a block pool reused
    for (std::size_t i = 0; i < descriptors_per_batch; ++i) {
      // Gaps between blocks, as between a paged pool's blocks of different requests: extents
      // that merge and split allocate, as content bookkeeping must (O(extents)).
      const std::uint64_t len = (std::uint64_t{16} << 10) << (slot % 3);
      const std::uint64_t off = (slot * 70 + i) * (128ull << 10);
      batches[k].push_back({base[static_cast<std::size_t>(s)] + off,
                            base[static_cast<std::size_t>(dst)] + (1ull << 29) + off, len});
    }
  }
  // The callback captures one pointer, so copying it into each batch needs no heap either.
  struct State {
    Fabric& fabric;
    std::vector<std::vector<CopyDescriptor>>& batches;
    std::vector<int>& engine_device;
    std::size_t concurrency, posted = 0, done = 0, counted = 0;
    void post_one() {
      const std::size_t k = posted++;
      fabric.post({engine_device[k], static_cast<int>(k % 4)}, std::move(batches[k]),
                  [this](const BatchOutcome& o) { finished(o); });
    }
    void finished(const BatchOutcome& o) {
      EXPECT_TRUE(o.ok) << o.error;
      ++done;
      if (done == kWarm) g_counting = true;
      if (done == kWarm + kCounted - concurrency) {
        counted = g_allocations.exchange(0);
        g_counting = false;
      }
      if (posted < batches.size()) post_one();
    }
  } state{fabric, batches, engine_device, concurrency};
  for (std::size_t i = 0; i < concurrency; ++i) state.post_one();
  sc_core::sc_start();
  EXPECT_EQ(state.done, batches.size());
  return state.counted;
}

TEST(FabricAllocation, AWarmFabricAllocatesNothingPerBatchChunkOrFlow) {
  EXPECT_EQ(allocations_when_warm(1, 1), 0u);
  EXPECT_EQ(allocations_when_warm(16, 1), 0u);
  EXPECT_EQ(allocations_when_warm(16, 70), 0u);  // three chunks a batch
}

}  // namespace
}  // namespace kvsim::model
