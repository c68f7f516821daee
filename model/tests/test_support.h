// Helpers shared by model tests: a fresh kernel per test and a batch runner.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "model/fabric.h"
#include "model/preset.h"
#include "model/sim_kernel.h"

namespace kvsim::model::testing {

/// The per-descriptor cost a class of route charges in a direction, restated from PathSpec's
/// contract: its own read cost for a read, else its write cost, else the engine's.
inline SimTime path_cost(const TopologySpec& s, const PathSpec& p, bool read) {
  if (read && p.read_descriptor_cost) return *p.read_descriptor_cost;
  return p.descriptor_cost.value_or(s.dma.descriptor_cost);
}

/// The share of a link's nominal bandwidth a class of route reaches in a direction.
inline double path_share(const LinkSpec& l, const PathSpec& p, bool read) {
  const double write = p.efficiency.value_or(l.efficiency);
  return read ? p.read_efficiency.value_or(write) : write;
}

/// A fabric on a fresh SystemC kernel, built from a preset with overrides.
class FabricFixture : public ::testing::Test {
 protected:
  void TearDown() override {
    fabric_.reset();
    fresh_kernel();
  }

  /// Destroys the previous fabric inside its own kernel (modules must die with their context
  /// current), then builds a new one on a fresh kernel.
  Fabric& build(const std::string& preset, const std::vector<Override>& overrides = {}) {
    fabric_.reset();
    fresh_kernel();
    spec_ = load_preset(preset, overrides);
    fabric_ = std::make_unique<Fabric>("fabric", spec_);
    return *fabric_;
  }

  /// The same from a spec built by the test.
  Fabric& build_spec(const TopologySpec& spec) {
    fabric_.reset();
    fresh_kernel();
    spec_ = spec;
    fabric_ = std::make_unique<Fabric>("fabric", spec_);
    return *fabric_;
  }

  /// Allocates `bytes` on a device's HBM (or a host memory) and returns the address.
  std::uint64_t alloc(MemoryId m, std::uint64_t bytes) {
    return fabric_->topology().memory(m).allocate(bytes, 2 << 20);
  }

  /// Posts `count` descriptors of `block` bytes from src to dst (contiguous runs) and records the
  /// outcome into `out` when it ends.
  std::uint64_t post_blocks(EngineRef engine, std::uint64_t src, std::uint64_t dst,
                            std::uint64_t block, std::size_t count,
                            std::optional<BatchOutcome>& out) {
    std::vector<CopyDescriptor> descs;
    for (std::size_t i = 0; i < count; ++i)
      descs.push_back({src + i * block, dst + i * block, block});
    return fabric_->post(engine, std::move(descs), [&out](const BatchOutcome& o) { out = o; });
  }

  /// On the fabric just built: `count` blocks from device `src` to device `dst`, posted on
  /// `engine`, run to the end; the batch's outcome (empty if it never ended).
  std::optional<BatchOutcome> run_blocks(int src, int dst, EngineRef engine, std::uint64_t block,
                                         std::size_t count) {
    Topology& t = fabric_->topology();
    const std::uint64_t a = alloc(t.device_memory(src), count * block);
    const std::uint64_t b = alloc(t.device_memory(dst), count * block);
    std::optional<BatchOutcome> out;
    post_blocks(engine, a, b, block, count, out);
    sc_core::sc_start();
    return out;
  }

  TopologySpec spec_;
  std::unique_ptr<Fabric> fabric_;
};

}  // namespace kvsim::model::testing
