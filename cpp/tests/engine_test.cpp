// The C++ API's rules (cpp/engine/data_dist_engine.h) on a world: Initialize and its options,
// RegisterKvCache ids and checks, links, and pulls and pushes with inclusive layer ranges, with
// the bytes checked.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cpp/engine/data_dist_engine.h"
#include "impl/status.h"
#include "sim/engine_setup.h"
#include "sim/world.h"

namespace kvsim::cpp {
namespace {

constexpr Status code(impl::LLMStatusCode c) {
  return static_cast<Status>(impl::to_int(c));
}
const Status kOk = code(impl::LLMStatusCode::LLM_SUCCESS);
const Status kInvalid = code(impl::LLMStatusCode::LLM_PARAM_INVALID);
const Status kFailed = code(impl::LLMStatusCode::LLM_FAILED);
constexpr std::int32_t kPrompt = 1;
constexpr std::int32_t kDecoder = 2;
constexpr std::uint64_t kMiB = 1ull << 20;

class CppEngine : public ::testing::Test {
 protected:
  CppEngine() : world_("atlas-a2"), platform_(world_.platform()) {}

  std::string listen(int device) const {
    return platform_.host_ip(platform_.node_of(device)) + ":" +
           std::to_string(sim::listen_port(device));
  }

  std::unique_ptr<DataDistEngine> engine(std::uint64_t cluster, std::int32_t role, int device,
                                         bool server) {
    auto e = std::make_unique<DataDistEngine>(platform_, world_.directory(), cluster, role);
    Options options = {{"llm.DeviceId", std::to_string(device)}};
    if (server) options["llm.ListenIpInfo"] = listen(device);
    EXPECT_EQ(e->initialize(options), kOk);
    return e;
  }

  Cluster to(std::uint64_t cluster, int server_device, int client_device) const {
    Cluster c;
    c.remote_cluster_id = cluster;
    c.local.push_back({platform_.host_ip(platform_.node_of(client_device)), 0});
    c.remote.push_back({platform_.host_ip(platform_.node_of(server_device)),
                        static_cast<std::uint16_t>(sim::listen_port(server_device))});
    return c;
  }

  // num_tensors tensors of [rows, row_bytes] INT8 on `device`, byte i of tensor t = f(t, i).
  std::vector<std::uint64_t> tensors(int device, std::uint32_t num_tensors, std::int64_t rows,
                                     std::int64_t row_bytes, int seed) {
    std::vector<std::uint64_t> addrs;
    for (std::uint32_t t = 0; t < num_tensors; ++t) {
      const auto a = platform_.allocate(device, impl::Placement::DEVICE,
                                        static_cast<std::uint64_t>(rows * row_bytes), 2 * kMiB);
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * row_bytes));
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = static_cast<std::uint8_t>(seed * 31 + t * 7 + i);
      }
      platform_.write(*a, bytes.data(), bytes.size());
      addrs.push_back(*a);
    }
    return addrs;
  }

  std::vector<std::uint8_t> read(std::uint64_t addr, std::uint64_t n) const {
    std::vector<std::uint8_t> out(n);
    platform_.read(addr, out.data(), n);
    return out;
  }

  static Desc desc(std::uint32_t num_tensors, std::int64_t rows, std::int64_t row_bytes) {
    Desc d;
    d.num_tensors = num_tensors;
    d.data_type = 2;  // DT_INT8
    d.shape = {rows, row_bytes};
    return d;
  }

  sim::World world_;
  sim::SystemcPlatform& platform_;
};

TEST_F(CppEngine, InitializeChecksTheOptionsTheCppApiChecks) {
  DataDistEngine e(platform_, world_.directory(), 1, kPrompt);
  EXPECT_EQ(e.initialize({}), kInvalid);  // llm.DeviceId required
  EXPECT_EQ(e.initialize({{"llm.DeviceId", ""}}), kInvalid);
  EXPECT_EQ(e.initialize({{"llm.DeviceId", "0;1"}}), kInvalid);  // one device
  EXPECT_EQ(e.initialize({{"llm.DeviceId", "0"}, {"llm.ListenIpInfo", "1.2.3"}}), kInvalid);
  std::int64_t unused = 0;
  EXPECT_EQ(e.register_kv_cache(desc(1, 1, 64), {1}, unused), kFailed);  // not yet
  EXPECT_EQ(e.initialize({{"llm.DeviceId", "0"}}), kOk);
  EXPECT_EQ(e.initialize({{"llm.DeviceId", "5"}}), kOk);  // again: a no-op
  EXPECT_EQ(e.dist().core()->device(), 0);
  // Always v2 with remote-accessible caches (LlmDataDistImpl::Initialize).
  EXPECT_EQ(e.dist().core()->version(), impl::ApiVersion::kV2);
  EXPECT_TRUE(e.dist().core()->options().enable_remote_cache_accessible);
  DataDistEngine bad_role(platform_, world_.directory(), 2, 4 /* kEnd */);
  EXPECT_EQ(bad_role.initialize({{"llm.DeviceId", "1"}}), kInvalid);
  // A listen address the host cannot bind is the library's failed bind.
  DataDistEngine elsewhere(platform_, world_.directory(), 3, kPrompt);
  EXPECT_EQ(elsewhere.initialize({{"llm.DeviceId", "2"}, {"llm.ListenIpInfo", listen(8)}}),
            kFailed);
}

TEST_F(CppEngine, RegisterKvCacheCountsIdsFromOneAndChecksItsArguments) {
  auto e = engine(1, kPrompt, 0, false);
  std::int64_t id = -1;
  const auto addrs = tensors(0, 2, 4, 256, 1);
  EXPECT_EQ(e->register_kv_cache(desc(2, 4, 256), {}, id), kInvalid);
  EXPECT_EQ(e->register_kv_cache(desc(3, 4, 256), addrs, id), kInvalid);
  EXPECT_EQ(e->register_kv_cache(desc(2, 4, 256), {addrs[0], 0}, id), kInvalid);
  Desc no_shape = desc(2, 4, 256);
  no_shape.shape.clear();
  EXPECT_EQ(e->register_kv_cache(no_shape, addrs, id), kInvalid);
  EXPECT_EQ(id, -1);
  for (std::int64_t expected = 1; expected <= 3; ++expected) {
    EXPECT_EQ(e->register_kv_cache(desc(2, 4, 256), tensors(0, 2, 4, 256, 2), id), kOk);
    EXPECT_EQ(id, expected);  // xLLM relies on both sides counting alike
  }
  EXPECT_EQ(e->unregister_kv_cache(2), kOk);
  EXPECT_EQ(e->unregister_kv_cache(42), kOk);  // an unknown id succeeds
}

TEST_F(CppEngine, PullsAndPushesWithInclusiveLayerRangesMoveTheRightBytes) {
  // Decoder (client, no listen address) pulls from and pushes to the prompt (server), as the
  // official examples do: 4 tensors (2 layers of K, V), 8 rows of 64 bytes, one MIX registration.
  auto p = engine(0, kPrompt, 0, true);
  auto d = engine(1, kDecoder, 8, false);
  std::int64_t pid = 0, did = 0;
  const auto paddrs = tensors(0, 4, 8, 64, 1);
  const auto daddrs = tensors(8, 4, 8, 64, 2);
  ASSERT_EQ(p->register_kv_cache(desc(4, 8, 64), paddrs, pid), kOk);
  ASSERT_EQ(d->register_kv_cache(desc(4, 8, 64), daddrs, did), kOk);
  std::vector<Status> rets;
  EXPECT_EQ(d->link({to(0, 0, 8)}, rets, 0), kInvalid);  // timeout <= 0
  ASSERT_EQ(d->link({to(0, 0, 8)}, rets, 1000), kOk);
  EXPECT_EQ(rets, std::vector<Status>{kOk});
  CacheRef local;
  local.cache_id = did;  // only the id is read by pulls
  // Blocks 1-3 of every tensor.
  ASSERT_EQ(d->pull_kv_blocks({0, pid, 0}, local, {1, 2, 3}, {1, 2, 3}, {}), kOk);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(read(daddrs[t] + 64, 3 * 64), read(paddrs[t] + 64, 3 * 64)) << t;
    EXPECT_NE(read(daddrs[t], 64), read(paddrs[t], 64)) << t;
  }
  // Row 5, layer 1 only (tensors 2, 3) into row 6.
  ExtParam layer1;
  layer1.src_first = layer1.src_second = 1;
  layer1.dst_first = layer1.dst_second = 1;
  ASSERT_EQ(d->pull_kv_cache({0, pid, 5}, local, 6, -1, layer1), kOk);
  EXPECT_EQ(read(daddrs[2] + 6 * 64, 64), read(paddrs[2] + 5 * 64, 64));
  EXPECT_NE(read(daddrs[0] + 6 * 64, 64), read(paddrs[0] + 5 * 64, 64));
  // Checks (E) and the C++ call rules.
  ExtParam backwards = layer1;
  backwards.src_first = 1;
  backwards.src_second = 0;
  EXPECT_EQ(d->pull_kv_cache({0, pid, 0}, local, 0, -1, backwards), kInvalid);
  EXPECT_EQ(d->pull_kv_blocks({0, pid, 1}, local, {1}, {1}, {}), kInvalid);  // batch_index 0
  EXPECT_EQ(d->pull_kv_blocks({0, pid, 0}, local, {}, {}, {}), kInvalid);
  EXPECT_EQ(d->pull_kv_cache({1, did, 0}, local, 0, -1, {}), kInvalid);  // from itself
  // Push layer by layer with tensor_num_per_layer 1, as the examples and xLLM do.
  CacheRef src;
  src.cache_id = did;
  src.desc = desc(4, 8, 64);
  for (std::int32_t l = 0; l < 4; ++l) {
    ExtParam one;
    one.src_first = one.src_second = one.dst_first = one.dst_second = l;
    one.tensor_num_per_layer = 1;
    ASSERT_EQ(d->push_kv_blocks(src, {0, pid, 0}, {0}, {7}, one), kOk) << l;
    EXPECT_EQ(read(paddrs[static_cast<std::size_t>(l)] + 7 * 64, 64),
              read(daddrs[static_cast<std::size_t>(l)], 64));
  }
  // The push reads placement from the caller's struct, and an all-layer range its num_tensors.
  CacheRef host = src;
  host.desc.placement = 0;
  EXPECT_EQ(d->push_kv_cache(host, {0, pid, 0}, 0, -1, {}), kInvalid);
  CacheRef id_only;
  id_only.cache_id = did;
  EXPECT_EQ(d->push_kv_cache(id_only, {0, pid, 0}, 0, -1, {}), kInvalid);
  ASSERT_EQ(d->push_kv_cache(src, {0, pid, 4}, 3, -1, {}), kOk);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(read(paddrs[t] + 4 * 64, 64), read(daddrs[t] + 3 * 64, 64)) << t;
  }
  EXPECT_EQ(d->push_kv_cache(src, {0, pid, 0}, 0, 64, {}), kInvalid);  // size must be -1
  EXPECT_EQ(d->unlink({to(0, 0, 8)}, rets, 1000, false), kOk);
}

TEST_F(CppEngine, ACppClientWithoutAListenAddressNeedsItsLocalIp) {
  auto p = engine(0, kPrompt, 0, true);
  auto d = engine(1, kDecoder, 8, false);
  Cluster bare = to(0, 0, 8);
  bare.local.clear();
  std::vector<Status> rets;
  EXPECT_EQ(d->link({bare}, rets, 1000), kInvalid);  // LinkMsgHandler::GenerateLocalCommRes
  auto listening = engine(2, kDecoder, 9, true);     // its listen address makes the comm resource
  EXPECT_EQ(listening->link({bare}, rets, 1000), kOk);
}

}  // namespace
}  // namespace kvsim::cpp
