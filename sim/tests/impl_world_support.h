// Support for the tests of impl on the SystemC world: a platform decorator that records every
// posted batch, a scripted LayerSynchronizer, a fixture with a prefill/decode pair, and byte
// helpers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "impl/directory.h"
#include "impl/forwarding_platform.h"
#include "impl/llm_datadist.h"
#include "sim/world.h"

namespace kvsim::sim::testing {

using impl::Time;
inline constexpr Time kUs = 1'000'000;
inline constexpr std::uint64_t kMiB = 1ull << 20;

/// One posted batch as the recorder saw it.
struct PostRecord {
  int device = -1;
  std::vector<impl::CopyDescriptor> descriptors;
  Time posted = 0;
  std::optional<Time> finished{};
  bool ok = false;
};

/// Forwards to the world's platform and records posts (and an event log shared with tests).
class RecordingPlatform final : public impl::ForwardingPlatform {
 public:
  explicit RecordingPlatform(impl::Platform& inner) : ForwardingPlatform(inner) {}

  void post(int device, int engine, std::vector<impl::CopyDescriptor> descriptors,
            std::function<void(const impl::CopyOutcome&)> done) override {
    const std::size_t index = posts.size();
    posts.push_back({device, descriptors, inner_.now(), std::nullopt, false});
    log.push_back("post " + std::to_string(descriptors.size()));
    inner_.post(device, engine, std::move(descriptors),
                [this, index, done](const impl::CopyOutcome& outcome) {
                  posts[index].finished = inner_.now();
                  posts[index].ok = outcome.ok;
                  log.push_back(outcome.ok ? "done" : "failed");
                  done(outcome);
                });
  }

  std::vector<PostRecord> posts;
  std::vector<std::string> log;
};

/// A LayerSynchronizer that logs its calls and answers as scripted.
class ScriptedSync final : public impl::LayerSynchronizer {
 public:
  explicit ScriptedSync(RecordingPlatform& platform) : platform_(platform) {}
  bool synchronize_layer(std::int64_t layer,
                         std::optional<std::int64_t> timeout_in_millis) override {
    calls.push_back(layer);
    timeouts_seen.push_back(timeout_in_millis);
    call_times.push_back(platform_.now());
    platform_.log.push_back("sync " + std::to_string(layer));
    if (on_call) on_call(layer);
    if (delay > 0) platform_.sleep(delay);
    if (throw_at && *throw_at == layer) throw std::runtime_error("model step failed");
    const auto it = answers.find(layer);
    return it == answers.end() || it->second;
  }

  std::vector<std::int64_t> calls;
  std::vector<std::optional<std::int64_t>> timeouts_seen;
  std::vector<Time> call_times;
  std::map<std::int64_t, bool> answers;
  std::optional<std::int64_t> throw_at;
  Time delay = 0;
  std::function<void(std::int64_t)> on_call;

 private:
  RecordingPlatform& platform_;
};

/// Deterministic bytes: a different sequence per seed.
std::vector<std::uint8_t> pattern(std::uint64_t size, std::uint64_t seed);

/// A cache with its memory.
struct TestCache {
  impl::CacheView view;
  std::vector<std::uint64_t> addrs;
};

/// The fixture: a world, a recording platform, and helpers for a P (cluster 1) / D (cluster 2)
/// pair. D listens on its node's host address; P links to it.
class ImplWorld : public ::testing::Test {
 protected:
  ImplWorld() : world_("atlas-a2"), platform_(world_.platform()) {}
  void TearDown() override;

  /// An initialized LLMDataDist on `device`, in a host process of its own (v2 unless `extra`
  /// says otherwise); `listen` makes it a server at sim::listen_port(device).
  std::unique_ptr<impl::LLMDataDist> make_dist(impl::LLMRole role, std::uint64_t cluster,
                                               int device, bool listen,
                                               std::map<std::string, std::string> extra = {});
  /// LLMClusterInfo for the server `cluster` on `device`, linked from `client_device`.
  impl::LLMClusterInfo cluster_info(std::uint64_t cluster, int device, int client_device = 0) const;
  /// Links `client` to the server (cluster, device) and asserts success.
  void link(impl::LLMDataDist& client, std::uint64_t cluster, int device);
  /// Allocates 2 MiB-aligned tensors for `desc` on `device`, fills them with `seed` bytes.
  std::vector<std::uint64_t> alloc_tensors(int device, const impl::CacheDesc& desc,
                                           std::uint32_t seed, bool fill = true);
  /// alloc_tensors then register_cache / register_blocks_cache on `dist`.
  TestCache register_cache(impl::LLMDataDist& dist, int device, const impl::CacheDesc& desc,
                           std::uint32_t seed, bool blocks = false,
                           std::optional<impl::BlocksCacheKey> key = std::nullopt,
                           std::vector<impl::CacheKey> keys = {});
  std::vector<std::uint8_t> read(std::uint64_t addr, std::uint64_t len) const;
  void write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes);
  /// The contents of every tensor of a cache, concatenated.
  std::vector<std::uint8_t> snapshot(const TestCache& cache) const;
  /// A v1.2 rank table with one server per device, rank i on devices[i].
  std::string rank_table(const std::vector<int>& devices) const;

  World world_;
  RecordingPlatform platform_;
};

/// Copies `len` bytes at `src_off` of `src` over `dst` at `dst_off` (expected images).
void splice(std::vector<std::uint8_t>& dst, std::uint64_t dst_off,
            const std::vector<std::uint8_t>& src, std::uint64_t src_off, std::uint64_t len);

/// An int8 cache description: num_tensors tensors of shape {rows, row_bytes}.
impl::CacheDesc int8_desc(std::int64_t num_tensors, std::int64_t rows, std::int64_t row_bytes,
                          impl::Placement placement = impl::Placement::DEVICE);

}  // namespace kvsim::sim::testing
