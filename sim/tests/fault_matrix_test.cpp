// The fault matrix (issue "Hardening", item 3): every public call of the API under every fault
// that can meet it, each cell on a fresh world. A cell checks the call's status or exception,
// the bytes it moved, that a failed call left the engines as they were, that the world is back
// to its first inventory once the program cleans up as a careful one would, and that the rest of
// the world still transfers correctly. The README's fault table is this test's table: the test
// fails when they differ, and writes the table it expects beside the test binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "impl/comm_domain.h"
#include "impl/copy_executor.h"
#include "impl/data_dist_core.h"
#include "impl/errors.h"
#include "sim/engine_setup.h"
#include "sim/tests/impl_world_support.h"
#include "sim/world_inventory.h"

namespace kvsim::sim::testing {
namespace {

using impl::LLMRole;
using impl::LLMStatusCode;

/// The faults of the matrix's columns.
enum class Fault {
  kDownBefore,     ///< the path's RoCE link is down when the call starts
  kDownDuring,     ///< it goes down 100 us into the call
  kDownAfter,      ///< it goes down right after the call returned
  kDegraded,       ///< it runs at a tenth of its bandwidth
  kPeerFinalized,  ///< the peer finalizes 100 us into the call
  kPeerGone,       ///< the peer's process dies 100 us into the call
  kTimeout,        ///< the call's own timeout expires first
  kOutOfMemory,    ///< the device (or pool) cannot hold the allocation
  kBadAddress,     ///< an address, id or key that is invalid or belongs to someone else
  kRepeated,       ///< the call made twice (or, for unregister, while a transfer reads)
  kInterrupt,      ///< the user's synchronize_layer raises (Ctrl-C in Python)
};

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kDownBefore:
      return "link down before";
    case Fault::kDownDuring:
      return "link down during";
    case Fault::kDownAfter:
      return "link down after";
    case Fault::kDegraded:
      return "link degraded";
    case Fault::kPeerFinalized:
      return "peer finalized";
    case Fault::kPeerGone:
      return "peer process gone";
    case Fault::kTimeout:
      return "timeout";
    case Fault::kOutOfMemory:
      return "out of memory";
    case Fault::kBadAddress:
      return "invalid/foreign address";
    case Fault::kRepeated:
      return "repeated";
    case Fault::kInterrupt:
      return "interrupt in synchronize";
  }
  return "?";
}

constexpr Fault kFaults[] = {Fault::kDownBefore, Fault::kDownDuring,    Fault::kDownAfter,
                             Fault::kDegraded,   Fault::kPeerFinalized, Fault::kPeerGone,
                             Fault::kTimeout,    Fault::kOutOfMemory,   Fault::kBadAddress,
                             Fault::kRepeated,   Fault::kInterrupt};

/// One cell: what the call must give under the fault, and the rule that says so.
struct Cell {
  const char* call;
  Fault fault;
  const char* expected;  ///< "ok", a returned status, "raises <status or error>", "task <status>"
  const char* rule;
};

/// How gtest and ctest name a cell ("pull_cache / link down during").
void PrintTo(const Cell& cell, std::ostream* out) {
  *out << cell.call << " / " << fault_name(cell.fault);
}

// Abbreviations of the outcome column: statuses without their LLM_ prefix.
const std::vector<Cell>& cells() {
  static const std::vector<Cell> table = {
      // link_clusters: the handshake goes over the hosts' network, the link is a connection
      // between the devices' NICs (HCCL over RoCE): it needs the path up from start to end.
      {"link_clusters", Fault::kDownBefore, "LINK_FAILED",
       "no connection over a down path, after the timeout [I]"},
      {"link_clusters", Fault::kDownDuring, "LINK_FAILED",
       "the connection broke before the exchange ended [I]"},
      {"link_clusters", Fault::kDownAfter, "SUCCESS",
       "the link stands; the next transfer over it fails"},
      {"link_clusters", Fault::kDegraded, "SUCCESS", "a slow path still connects"},
      {"link_clusters", Fault::kPeerFinalized, "LINK_FAILED",
       "the server left before the exchange ended"},
      {"link_clusters", Fault::kPeerGone, "LINK_FAILED", "nobody answers the exchange"},
      {"link_clusters", Fault::kTimeout, "LINK_FAILED",
       "nobody listens at the address within timeout (§4)"},
      {"link_clusters", Fault::kBadAddress, "LINK_FAILED",
       "remote_ip_info of a host nobody listens on (§4)"},
      {"link_clusters", Fault::kRepeated, "ALREADY_LINK",
       "one link per pair (link_msg_handler.cc)"},
      // unlink_clusters: tells the server over the hosts' network, then drops this side.
      {"unlink_clusters", Fault::kDownBefore, "SUCCESS", "unlinking needs only the hosts' network"},
      {"unlink_clusters", Fault::kDownAfter, "SUCCESS", "nothing is left to fail"},
      {"unlink_clusters", Fault::kDegraded, "SUCCESS", "unlinking needs only the hosts' network"},
      {"unlink_clusters", Fault::kPeerFinalized, "UNLINK_FAILED",
       "the server's finalize dropped both ends and it listens no more: kDisconnect fails "
       "(LinkMsgHandler::UnlinkCluster)"},
      {"unlink_clusters", Fault::kPeerGone, "UNLINK_FAILED",
       "nobody listens to be told; force=True then drops our end (§4)"},
      {"unlink_clusters", Fault::kBadAddress, "UNLINK_FAILED",
       "nobody listens at that remote_ip_info; our link stays (§4)"},
      {"unlink_clusters", Fault::kRepeated, "SUCCESS",
       "unlinking a cluster not linked succeeds (v2, §4)"},
      // Registration is local: the link's state does not matter.
      {"register_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"register_cache", Fault::kDegraded, "ok", "local to the process"},
      {"register_cache", Fault::kBadAddress, "raises PARAM_INVALID",
       "an address outside any allocation of the device"},
      {"register_cache", Fault::kRepeated, "ok",
       "a second registration of the same memory is a new cache [I]"},
      {"register_blocks_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"register_blocks_cache", Fault::kBadAddress, "raises PARAM_INVALID",
       "an address outside any allocation of the device"},
      {"register_blocks_cache", Fault::kRepeated, "raises FAILED",
       "the BlocksCacheKey is in use: LLM_CACHE_KEY_ALREADY_EXIST, which Python's code_2_status "
       "reports as LLM_FAILED"},
      {"unregister_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"unregister_cache", Fault::kBadAddress, "ok",
       "an unknown cache id is ignored (cache_manager.py)"},
      {"unregister_cache", Fault::kRepeated, "ok",
       "while a pull reads it: the pull still completes from memory the user keeps"},
      {"allocate_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"allocate_cache", Fault::kOutOfMemory, "raises OUT_OF_MEMORY",
       "the pool is exhausted (§6 code 28)"},
      {"allocate_cache", Fault::kRepeated, "ok", "each call takes new pool memory"},
      {"deallocate_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"deallocate_cache", Fault::kRepeated, "ok", "a cache already freed is ignored"},
      // One-sided reads and writes over the link (§3.4 execution).
      {"pull_cache", Fault::kDownBefore, "raises SUSPECT_REMOTE_ERROR",
       "the copy fails at fault detection (ACL 507057)"},
      {"pull_cache", Fault::kDownDuring, "raises SUSPECT_REMOTE_ERROR",
       "the copy in flight fails at fault detection"},
      {"pull_cache", Fault::kDownAfter, "ok", "the bytes landed before the fault"},
      {"pull_cache", Fault::kDegraded, "ok", "slower, byte-exact"},
      {"pull_cache", Fault::kPeerFinalized, "ok",
       "the read holds the link; the peer's memory stays the user's"},
      {"pull_cache", Fault::kPeerGone, "ok",
       "the read was posted before the death; its memory stays mapped"},
      {"pull_cache", Fault::kTimeout, "raises TIMEOUT", "llm.SyncKvCacheWaitTime passed (§5, v2)"},
      {"pull_cache", Fault::kBadAddress, "raises KV_CACHE_NOT_EXIST",
       "no remote cache with that id"},
      {"pull_cache", Fault::kRepeated, "ok", "CacheKeyByIdAndIndex is not consumed"},
      {"pull_blocks", Fault::kDownBefore, "raises SUSPECT_REMOTE_ERROR",
       "the copy fails at fault detection"},
      {"pull_blocks", Fault::kDownDuring, "raises SUSPECT_REMOTE_ERROR",
       "the copy in flight fails at fault detection"},
      {"pull_blocks", Fault::kDownAfter, "ok", "the bytes landed before the fault"},
      {"pull_blocks", Fault::kDegraded, "ok", "slower, byte-exact"},
      {"pull_blocks", Fault::kPeerFinalized, "ok",
       "the read holds the link; the peer's memory stays the user's"},
      {"pull_blocks", Fault::kPeerGone, "ok", "the read was posted before the death"},
      {"pull_blocks", Fault::kTimeout, "raises TIMEOUT", "llm.SyncKvCacheWaitTime passed (§5, v2)"},
      {"pull_blocks", Fault::kBadAddress, "raises KV_CACHE_NOT_EXIST",
       "no remote blocks cache with that key"},
      {"pull_blocks", Fault::kRepeated, "ok", "BlocksCacheKey is not consumed"},
      {"push_cache", Fault::kDownBefore, "raises SUSPECT_REMOTE_ERROR",
       "the copy fails at fault detection"},
      {"push_cache", Fault::kDownDuring, "raises SUSPECT_REMOTE_ERROR",
       "the copy in flight fails at fault detection"},
      {"push_cache", Fault::kDownAfter, "ok", "the bytes landed before the fault"},
      {"push_cache", Fault::kDegraded, "ok", "slower, byte-exact"},
      {"push_cache", Fault::kPeerFinalized, "raises NOT_YET_LINK",
       "layer by layer: the peer's finalize dropped the link before layer 1"},
      {"push_cache", Fault::kPeerGone, "raises SUSPECT_REMOTE_ERROR",
       "push_cache writes layer by layer: the layers after the death fail, the earlier ones "
       "landed"},
      {"push_cache", Fault::kTimeout, "raises TIMEOUT", "llm.SyncKvCacheWaitTime passed (§5, v2)"},
      {"push_cache", Fault::kBadAddress, "raises KV_CACHE_NOT_EXIST",
       "no remote cache with that id"},
      {"push_cache", Fault::kRepeated, "ok", "pushing twice writes the same bytes"},
      {"push_blocks", Fault::kDownBefore, "raises SUSPECT_REMOTE_ERROR",
       "the copy fails at fault detection"},
      {"push_blocks", Fault::kDownDuring, "raises SUSPECT_REMOTE_ERROR",
       "the copy in flight fails at fault detection"},
      {"push_blocks", Fault::kDownAfter, "ok", "the bytes landed before the fault"},
      {"push_blocks", Fault::kDegraded, "ok", "slower, byte-exact"},
      {"push_blocks", Fault::kPeerFinalized, "ok", "its one layer was posted before the finalize"},
      {"push_blocks", Fault::kPeerGone, "ok", "its one layer was posted before the death"},
      {"push_blocks", Fault::kTimeout, "raises TIMEOUT", "llm.SyncKvCacheWaitTime passed (§5, v2)"},
      {"push_blocks", Fault::kBadAddress, "raises KV_CACHE_NOT_EXIST",
       "no remote blocks cache with that key"},
      {"push_blocks", Fault::kRepeated, "ok", "pushing twice writes the same bytes"},
      // transfer_cache_async: the call returns a task at once; the outcome is the task's (§3.3).
      {"transfer_cache_async", Fault::kDownBefore, "task SUSPECT_REMOTE_ERROR",
       "the first layer's copy fails (§3.4)"},
      {"transfer_cache_async", Fault::kDownDuring, "task SUSPECT_REMOTE_ERROR",
       "the layer in flight fails; earlier layers stay (§3.4)"},
      {"transfer_cache_async", Fault::kDownAfter, "task SUCCESS",
       "every layer landed before the fault"},
      {"transfer_cache_async", Fault::kDegraded, "task SUCCESS", "slower, byte-exact"},
      {"transfer_cache_async", Fault::kPeerFinalized, "task NOT_YET_LINK",
       "the peer's finalize dropped the link; later layers find none (§3.4)"},
      {"transfer_cache_async", Fault::kPeerGone, "task SUSPECT_REMOTE_ERROR",
       "later layers write to a lost peer"},
      {"transfer_cache_async", Fault::kTimeout, "task TIMEOUT",
       "a layer outlived llm.SyncKvCacheWaitTime (§3.4)"},
      {"transfer_cache_async", Fault::kBadAddress, "task FAILED",
       "dst_addrs outside the peer's memory: the layer fails, with a diagnostic [I]"},
      {"transfer_cache_async", Fault::kRepeated, "task SUCCESS",
       "two tasks run one after the other (§3.4 mutex)"},
      {"transfer_cache_async", Fault::kInterrupt, "task SUCCESS, results [None]",
       "the job thread dies and synchronize() skips None (§3.2 [I]); kvsim adds a diagnostic"},
      {"allocate_blocks_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"allocate_blocks_cache", Fault::kOutOfMemory, "raises OUT_OF_MEMORY",
       "larger than the 16 MiB pool (§5)"},
      {"allocate_blocks_cache", Fault::kRepeated, "ok", "each call takes new pool memory"},
      {"deallocate_blocks_cache", Fault::kDownBefore, "ok", "local to the process"},
      {"deallocate_blocks_cache", Fault::kBadAddress, "ok", "an unknown cache id is ignored [I]"},
      {"deallocate_blocks_cache", Fault::kRepeated, "ok", "a cache already freed is ignored"},
      {"remove_cache_key", Fault::kDownBefore, "ok",
       "the deallocated cache's memory goes with its last key (§4)"},
      {"remove_cache_key", Fault::kBadAddress, "ok",
       "a registered cache's key is left as it is (CacheManager::RemoveCacheKey)"},
      {"remove_cache_key", Fault::kRepeated, "ok",
       "an absent key is SUCCESS (CacheManager::RemoveCacheKey)"},
      // Local copies never touch the link.
      {"copy_cache", Fault::kDownBefore, "ok", "a copy inside the device"},
      {"copy_cache", Fault::kBadAddress, "raises KV_CACHE_NOT_EXIST", "an unknown cache id"},
      {"copy_cache", Fault::kRepeated, "ok", "copying twice writes the same bytes"},
      {"copy_blocks", Fault::kDownBefore, "ok", "a copy inside the device"},
      {"copy_blocks", Fault::kBadAddress, "raises PARAM_INVALID",
       "a block index past the cache's blocks"},
      {"copy_blocks", Fault::kRepeated, "ok", "copying twice writes the same bytes"},
      {"swap_blocks", Fault::kDownBefore, "ok", "host and device of one node: no link"},
      {"swap_blocks", Fault::kBadAddress, "raises PARAM_INVALID",
       "device to device is not a swap (v2 cache_manager.py swap_blocks)"},
      {"swap_blocks", Fault::kRepeated, "ok", "swapping twice writes the same bytes"},
      // The comm-domain API: link() returns at once; query_register_mem_status tells the end.
      {"link (comm domain)", Fault::kDownBefore, "FAILED",
       "the members' NICs cannot connect over a down path [I]"},
      {"link (comm domain)", Fault::kDownDuring, "FAILED",
       "the path broke before the memory exchange ended [I]"},
      {"link (comm domain)", Fault::kDownAfter, "OK",
       "the domain stands; the next pull over it fails"},
      {"link (comm domain)", Fault::kDegraded, "OK", "a slow path still connects"},
      {"link (comm domain)", Fault::kPeerFinalized, "FAILED",
       "a member left before the domain formed (§4)"},
      {"link (comm domain)", Fault::kPeerGone, "FAILED",
       "a member's process died before the domain formed"},
      {"link (comm domain)", Fault::kTimeout, "FAILED",
       "a member never called link within llm.LinkTotalTime (§4)"},
      {"link (comm domain)", Fault::kBadAddress, "raises PARAM_INVALID",
       "the rank table gives a member another device's device_ip: that member's link refuses"},
      {"link (comm domain)", Fault::kRepeated, "raises ALREADY_LINK",
       "the members are linked (or being linked) by the first call (§4)"},
      {"unlink (comm domain)", Fault::kDownBefore, "ok", "unlinking needs no path"},
      {"unlink (comm domain)", Fault::kPeerFinalized, "ok",
       "the other member's finalize left our side to drop"},
      {"unlink (comm domain)", Fault::kBadAddress, "raises NOT_YET_LINK",
       "no comm domain with that id in this process"},
      {"unlink (comm domain)", Fault::kRepeated, "raises NOT_YET_LINK",
       "the first unlink removed the comm id"},
      // Engine lifecycle.
      {"init", Fault::kOutOfMemory, "raises DEVICE_OUT_OF_MEMORY",
       "llm.MemPoolConfig larger than the device (§5)"},
      {"init", Fault::kBadAddress, "raises FAILED", "a listen address the host cannot bind (§5)"},
      {"init", Fault::kRepeated, "ok", "init of an initialized engine does nothing"},
      {"switch_role", Fault::kDownBefore, "ok", "local to the process"},
      {"switch_role", Fault::kRepeated, "ok", "v2 allows the same role again"},
      {"finalize", Fault::kDownBefore, "ok", "finalize needs no link"},
      {"finalize", Fault::kPeerFinalized, "ok", "the peer's finalize already dropped the link"},
      {"finalize", Fault::kPeerGone, "ok", "the lost link is dropped"},
      {"finalize", Fault::kRepeated, "ok", "finalize of a finalized engine does nothing"},
  };
  return table;
}

/// Equal byte images, or where they first differ.
::testing::AssertionResult same_bytes(const std::vector<std::uint8_t>& a,
                                      const std::vector<std::uint8_t>& b) {
  if (a == b) return ::testing::AssertionSuccess();
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return ::testing::AssertionFailure()
         << "bytes differ from offset " << i << " (sizes " << a.size() << ", " << b.size() << ")";
}

std::string status(LLMStatusCode code) {
  std::string s(impl::to_string(code));
  return s.rfind("LLM_", 0) == 0 ? s.substr(4) : s;
}

/// Runs `fn`, naming what it raised.
std::string outcome_of(const std::function<void()>& fn) {
  try {
    fn();
    return "ok";
  } catch (const impl::LLMException& e) {
    return "raises " + status(e.status_code());
  } catch (const impl::TypeError&) {
    return "raises TypeError";
  } catch (const impl::ValueError&) {
    return "raises ValueError";
  } catch (const std::exception& e) {
    return std::string("raises ") + e.what();
  }
}

constexpr Time kLinkTimeoutMs = 500;
const char* const kPathLink = "roce n0d0";  // device 0's NIC: every path between P and D

class FaultMatrix : public ImplWorld, public ::testing::WithParamInterface<Cell> {
 protected:
  void SetUp() override { baseline_ = take_inventory(world_); }

  // The link events of the faults, applied from the driver.
  void link_event(Time at, model::LinkEvent ev) {
    world_.fabric().schedule_link_event(kPathLink, at, ev);
  }
  void down_now() {
    link_event(platform_.now() + 1, {model::LinkEvent::Kind::kDown});
    platform_.sleep(2);
  }
  void degrade_now() {
    link_event(platform_.now() + 1, {model::LinkEvent::Kind::kDegrade, 0.1});
    platform_.sleep(2);
  }
  void restore() {
    link_event(platform_.now() + 1, {model::LinkEvent::Kind::kUp});
    platform_.sleep(2);
  }
  /// P unlinks D (force) and links it again, as an engine does after a transport failure.
  void relink() {
    ASSERT_EQ(p_->unlink_clusters({cluster_info(2, 8)}, kLinkTimeoutMs, true).first,
              LLMStatusCode::LLM_SUCCESS);
    ASSERT_EQ(p_->link_clusters({cluster_info(2, 8)}, kLinkTimeoutMs).first,
              LLMStatusCode::LLM_SUCCESS);
  }
  /// After a transport failure the link stays unusable once the path is back, until relinked
  /// (impl::mark_transport_failure): `fn` fails at once, then works after relink().
  void expect_unusable_until_relinked(const std::function<void()>& fn) {
    const Time t0 = platform_.now();
    EXPECT_EQ(outcome_of(fn), "raises " + status(LLMStatusCode::LLM_FAILED));
    EXPECT_EQ(platform_.now(), t0) << "an unusable link fails before posting anything";
    relink();
    EXPECT_EQ(outcome_of(fn), "ok");
  }
  /// Runs `fn` as the peer's process `delay` from now (a job, so it meets the call in flight).
  void as_peer_later(Time delay, std::function<void()> fn) {
    world_.platform().spawn_as(d_->core()->process(), "peer", [this, delay, fn] {
      platform_.sleep(delay);
      fn();
    });
  }

  /// P (cluster 1, device 0, a 16 MiB pool) and D (cluster 2, device 8, listening), with P's
  /// and D's caches; P linked to D when `linked`.
  void rig(bool linked, std::map<std::string, std::string> p_extra = {}) {
    p_extra[impl::kOptionMemPoolConfig] = "{\"memory_size\": 16777216}";
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, p_extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, true);
    p_process_ = p_->core()->process();
    psrc_ = register_cache(*p_, 0, cdesc_, 1);
    pblocks_ = register_cache(*p_, 0, bdesc_, 2, true);
    dcache_ = register_cache(*d_, 8, cdesc_, 3);
    dblocks_ = register_cache(*d_, 8, bdesc_, 4, true, impl::BlocksCacheKey{2, 0});
    if (linked) link(*p_, 2, 8);
  }
  impl::CacheManager& pm() { return p_->cache_manager(); }
  /// Cluster `cluster` said to listen on a host of the user's network that is not in the world.
  impl::LLMClusterInfo foreign_server(std::uint64_t cluster, int client_device) const {
    impl::LLMClusterInfo info;
    info.set_remote_cluster_id(cluster);
    info.append_local_ip_info(platform_.host_ip(platform_.node_of(client_device)), 0);
    info.append_remote_ip_info("192.168.77.1", listen_port(8));
    return info;
  }

  // The calls, as a program on P makes them.
  void pull() {
    pm().pull_cache(impl::CacheKeyByIdAndIndex(2, dcache_.view.cache_id, 0), psrc_.view);
  }
  void pull_blocks() {
    pm().pull_blocks(impl::BlocksCacheKey{2, 0}, pblocks_.view, {0, 1, 5}, {2, 3, 4});
  }
  void push() {
    pm().push_cache(impl::CacheKeyByIdAndIndex(2, dcache_.view.cache_id, 0), psrc_.view);
  }
  void push_blocks() {
    pm().push_blocks(impl::BlocksCacheKey{2, 0}, pblocks_.view, {0, 1, 5}, {2, 3, 4});
  }

  /// Bytes a finished pull or push must have left (whole caches for the contiguous ones).
  void expect_moved(const std::string& call) {
    if (call == "pull_cache") {
      EXPECT_TRUE(same_bytes(snapshot(psrc_), snapshot(dcache_)));
    }
    if (call == "push_cache") {
      EXPECT_TRUE(same_bytes(snapshot(dcache_), snapshot(psrc_)));
    }
    const std::uint64_t block = bdesc_.size() / 8;
    auto block_of = [&](const TestCache& c, std::size_t t, std::uint64_t b) {
      return read(c.addrs[t] + b * block, block);
    };
    for (std::size_t t = 0; t < pblocks_.addrs.size(); ++t) {
      const std::pair<std::uint64_t, std::uint64_t> map[] = {{0, 2}, {1, 3}, {5, 4}};
      for (const auto& [s, d] : map) {
        if (call == "pull_blocks") {
          EXPECT_EQ(block_of(pblocks_, t, d), block_of(dblocks_, t, s));
        }
        if (call == "push_blocks") {
          EXPECT_EQ(block_of(dblocks_, t, d), block_of(pblocks_, t, s));
        }
      }
    }
  }

  static TestCache none() { return {impl::CacheView{-1, int8_desc(1, 1, 1)}, {}}; }
  std::string run_data_call(const Cell& cell);
  std::string run_transfer(const Cell& cell);
  std::string run_comm_domain(const Cell& cell);
  std::string run_cell(const Cell& cell);
  void clean_up();
  void expect_bystanders_transfer();

  impl::CacheDesc cdesc_ = int8_desc(4, 1, 4 * static_cast<std::int64_t>(kMiB));  // 16 MiB
  impl::CacheDesc bdesc_ = int8_desc(2, 8, static_cast<std::int64_t>(kMiB));      // 16 MiB
  impl::CacheDesc small_ = int8_desc(2, 8, 256 * 1024);                           // 4 MiB
  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
  int p_process_ = 0;
  TestCache psrc_ = none(), pblocks_ = none(), dcache_ = none(), dblocks_ = none();
  std::vector<std::uint64_t> extra_memory_;  // allocations the cell made for itself
  WorldInventory baseline_;
  bool peer_dead_ = false;
  bool force_unlink_ = false;
};

// pull_cache, pull_blocks, push_cache, push_blocks under every fault that can meet them.
std::string FaultMatrix::run_data_call(const Cell& cell) {
  const std::string call = cell.call;
  std::map<std::string, std::string> options;
  if (cell.fault == Fault::kTimeout) options[impl::kOptionSyncKvCacheWaitTime] = "1";
  // §4: push_* needs llm.EnableRemoteCacheAccessible.
  if (call.rfind("push", 0) == 0) options[impl::kOptionEnableRemoteCacheAccessible] = "1";
  rig(true, options);
  std::function<void()> fn = [&] {
    if (call == "pull_cache") pull();
    if (call == "pull_blocks") pull_blocks();
    if (call == "push_cache") push();
    if (call == "push_blocks") push_blocks();
  };
  const WorldInventory before = take_inventory(world_);
  std::string out;
  switch (cell.fault) {
    case Fault::kDownBefore:
      down_now();
      out = outcome_of(fn);
      EXPECT_EQ(describe_difference(before, take_inventory(world_)), "");
      restore();
      break;
    case Fault::kDownDuring:
      link_event(platform_.now() + 100 * kUs, {model::LinkEvent::Kind::kDown});
      out = outcome_of(fn);
      EXPECT_EQ(describe_difference(before, take_inventory(world_)), "");
      restore();
      expect_unusable_until_relinked(fn);
      break;
    case Fault::kDownAfter:
      out = outcome_of(fn);
      down_now();
      expect_moved(call);
      // The fault is real: the next call fails, and the link needs relinking once it is back.
      EXPECT_EQ(outcome_of(fn), "raises " + status(impl::kCopyFailedStatus));
      restore();
      expect_unusable_until_relinked(fn);
      break;
    case Fault::kDegraded: {
      degrade_now();
      const Time t0 = platform_.now();
      out = outcome_of(fn);
      const Time slow = platform_.now() - t0;
      expect_moved(call);
      restore();
      const Time t1 = platform_.now();
      EXPECT_EQ(outcome_of(fn), "ok");
      EXPECT_GT(slow, 3 * (platform_.now() - t1)) << "the degraded link must be slower";
      break;
    }
    case Fault::kPeerFinalized:
      as_peer_later(100 * kUs, [this] { d_->finalize(); });
      out = outcome_of(fn);
      if (out == "ok") expect_moved(call);
      break;
    case Fault::kPeerGone:
      as_peer_later(100 * kUs, [this] { d_->abandon("killed"); });
      out = outcome_of(fn);
      if (out == "ok") expect_moved(call);
      peer_dead_ = true;
      // The death is real: the next call over the lost link fails.
      EXPECT_EQ(outcome_of(fn), "raises " + status(impl::kCopyFailedStatus));
      break;
    case Fault::kTimeout:
      degrade_now();  // 16 MiB at a tenth of 200 Gb/s: about 7 ms, against a 1 ms timeout
      out = outcome_of(fn);
      EXPECT_EQ(describe_difference(before, take_inventory(world_)),
                "open batches: 0 -> 1\n");  // the platform cannot cancel a posted copy
      restore();
      platform_.sleep(100 * kUs * 1000);
      expect_unusable_until_relinked(fn);
      break;
    case Fault::kBadAddress:
      out = outcome_of([&] {
        if (call == "pull_cache")
          pm().pull_cache(impl::CacheKeyByIdAndIndex(2, 999, 0), psrc_.view);
        if (call == "push_cache")
          pm().push_cache(impl::CacheKeyByIdAndIndex(2, 999, 0), psrc_.view);
        if (call == "pull_blocks")
          pm().pull_blocks(impl::BlocksCacheKey{2, 7}, pblocks_.view, {0}, {1});
        if (call == "push_blocks")
          pm().push_blocks(impl::BlocksCacheKey{2, 7}, pblocks_.view, {0}, {1});
      });
      EXPECT_EQ(describe_difference(before, take_inventory(world_)), "");
      break;
    case Fault::kRepeated:
      out = outcome_of(fn);
      if (out == "ok") out = outcome_of(fn);
      expect_moved(call);
      break;
    default:
      ADD_FAILURE() << "no such cell";
  }
  return out;
}

std::string FaultMatrix::run_transfer(const Cell& cell) {
  rig(true, cell.fault == Fault::kTimeout
                ? std::map<std::string, std::string>{{impl::kOptionSyncKvCacheWaitTime, "1"}}
                : std::map<std::string, std::string>{});
  auto sync = std::make_shared<ScriptedSync>(platform_);
  std::vector<impl::AnyTransferConfig> configs = {impl::TransferConfig(2, dcache_.addrs)};
  if (cell.fault == Fault::kBadAddress) {
    std::vector<std::uint64_t> foreign = dcache_.addrs;
    foreign[1] = psrc_.addrs[1];  // P's own memory, not the peer's
    configs = {impl::TransferConfig(2, foreign)};
  }
  if (cell.fault == Fault::kInterrupt) sync->throw_at = 1;
  if (cell.fault == Fault::kDownBefore) down_now();
  if (cell.fault == Fault::kDegraded || cell.fault == Fault::kTimeout) degrade_now();
  if (cell.fault == Fault::kDownDuring) {
    link_event(platform_.now() + 100 * kUs, {model::LinkEvent::Kind::kDown});
  }
  if (cell.fault == Fault::kPeerFinalized) as_peer_later(100 * kUs, [this] { d_->finalize(); });
  if (cell.fault == Fault::kPeerGone) {
    as_peer_later(100 * kUs, [this] { d_->abandon("killed"); });
    peer_dead_ = true;
  }
  auto task = pm().transfer_cache_async(psrc_.view, sync, configs);
  std::string out = "task " + status(task.synchronize());
  if (task.get_results(std::nullopt) == std::vector<std::optional<LLMStatusCode>>{std::nullopt}) {
    out += ", results [None]";
  }
  if (cell.fault == Fault::kRepeated) {
    auto again = pm().transfer_cache_async(psrc_.view, sync, configs);
    auto third = pm().transfer_cache_async(psrc_.view, sync, configs);
    EXPECT_EQ(again.synchronize(), LLMStatusCode::LLM_SUCCESS);
    out = "task " + status(third.synchronize());
  }
  if (cell.fault == Fault::kDownAfter) down_now();
  if (out == "task SUCCESS") {
    EXPECT_TRUE(same_bytes(snapshot(dcache_), snapshot(psrc_)));
  }
  EXPECT_EQ(p_->core()->tasks_in_flight, 0);
  restore();
  platform_.sleep(10 * kUs * 1000);  // copies a timeout left running land
  return out;
}

// link and unlink of the comm-domain API between P and D, under the faults that can meet them.
std::string FaultMatrix::run_comm_domain(const Cell& cell) {
  const Fault f = cell.fault;
  rig(false);
  const impl::ClusterRankInfo members{{1, 0}, {2, 1}};
  const std::string table = rank_table({0, 8});
  const Time setup = 2 * platform_.round_trip(0, 8);
  auto status_of = [&](std::uint64_t comm_id) {
    world_.platform().drive_until(
        [&] {
          return p_->query_register_mem_status(comm_id) != impl::RegisterMemStatus::PREPARING;
        },
        600 * 1'000'000'000'000ull);
    return p_->query_register_mem_status(comm_id) == impl::RegisterMemStatus::OK ? "OK" : "FAILED";
  };
  if (cell.call == std::string("link (comm domain)")) {
    if (f == Fault::kDownBefore) down_now();
    if (f == Fault::kDegraded) degrade_now();
    if (f == Fault::kDownDuring) {
      link_event(platform_.now() + setup / 2, {model::LinkEvent::Kind::kDown});
    }
    if (f == Fault::kBadAddress) {
      std::string wrong = table;
      const std::string ip = platform_.device_ip(8);
      wrong.replace(wrong.find(ip), ip.size(), platform_.device_ip(9));
      std::string out = outcome_of([&] {
        const std::uint64_t id = p_->link("pd", members, wrong);
        d_->link("pd", members, wrong);
        out = status_of(id);
      });
      return out;
    }
    const std::uint64_t id = p_->link("pd", members, table);
    if (f == Fault::kRepeated) return outcome_of([&] { p_->link("pd", members, table); });
    if (f != Fault::kTimeout) {  // with a timeout, D never calls
      d_->link("pd", members, table);
    }
    if (f == Fault::kPeerFinalized) as_peer_later(setup / 2, [this] { d_->finalize(); });
    if (f == Fault::kPeerGone) {
      as_peer_later(setup / 2, [this] { d_->abandon("killed"); });
      peer_dead_ = true;
    }
    const std::string out = status_of(id);
    if (f == Fault::kDownAfter) {
      down_now();
      EXPECT_EQ(outcome_of([&] { pull(); }), "raises " + status(impl::kCopyFailedStatus));
    }
    restore();
    return out;
  }
  // unlink
  const std::uint64_t id = p_->link("pd", members, table);
  const std::uint64_t d_id = d_->link("pd", members, table);
  EXPECT_EQ(std::string(status_of(id)), "OK");
  if (f == Fault::kDownBefore) down_now();
  if (f == Fault::kPeerFinalized) d_->finalize();
  if (f == Fault::kBadAddress) return outcome_of([&] { p_->unlink(id + 100); });
  std::string out = outcome_of([&] { p_->unlink(id); });
  if (f == Fault::kRepeated && out == "ok") out = outcome_of([&] { p_->unlink(id); });
  if (d_->initialized()) d_->unlink(d_id);
  restore();
  return out;
}

std::string FaultMatrix::run_cell(const Cell& cell) {
  const std::string call = cell.call;
  const Fault f = cell.fault;
  if (call == "pull_cache" || call == "pull_blocks" || call == "push_cache" ||
      call == "push_blocks") {
    return run_data_call(cell);
  }
  if (call == "transfer_cache_async") return run_transfer(cell);
  const bool link_fault = f == Fault::kDownBefore || f == Fault::kDegraded;
  if (call == "link_clusters") {
    rig(false);
    const impl::LLMClusterInfo info = cluster_info(2, 8);
    auto link_code = [&](const impl::LLMClusterInfo& i) {
      return status(p_->link_clusters({i}, kLinkTimeoutMs).first);
    };
    const Time t0 = platform_.now();
    std::string out;
    if (f == Fault::kDownBefore) down_now();
    if (f == Fault::kDegraded) degrade_now();
    if (f == Fault::kDownDuring) {
      link_event(platform_.now() + platform_.round_trip(0, 8), {model::LinkEvent::Kind::kDown});
    }
    if (f == Fault::kPeerFinalized)
      as_peer_later(platform_.round_trip(0, 8), [this] { d_->finalize(); });
    if (f == Fault::kPeerGone) {
      as_peer_later(platform_.round_trip(0, 8), [this] { d_->abandon("killed"); });
      peer_dead_ = true;
    }
    if (f == Fault::kTimeout) d_->switch_role(LLMRole::DECODER, {});  // stops listening
    if (f == Fault::kBadAddress) {
      out = link_code(foreign_server(2, 0));
    } else {
      out = link_code(info);
    }
    if (f == Fault::kRepeated) out = link_code(info);
    if (f == Fault::kDownAfter) {
      down_now();
      EXPECT_EQ(outcome_of([&] { pull(); }), "raises " + status(impl::kCopyFailedStatus));
    }
    if (out == "LINK_FAILED") {
      EXPECT_TRUE(p_->core()->links().empty()) << "a failed link leaves no end behind";
      if (f != Fault::kPeerFinalized && f != Fault::kPeerGone) {
        EXPECT_EQ(platform_.now() - t0 - (f == Fault::kDownBefore ? 2 : 0),
                  kLinkTimeoutMs * 1'000'000'000ull)
            << "a link that cannot be made takes the whole timeout";
      }
    }
    restore();
    return out;
  }
  if (call == "unlink_clusters") {
    rig(true);
    impl::LLMClusterInfo info = cluster_info(2, 8);
    if (link_fault) f == Fault::kDownBefore ? down_now() : degrade_now();
    if (f == Fault::kPeerFinalized) d_->finalize();
    if (f == Fault::kPeerGone) {
      d_->abandon("killed");
      peer_dead_ = true;
    }
    if (f == Fault::kBadAddress) info = foreign_server(2, 0);
    std::string out = status(p_->unlink_clusters({info}).first);
    if (f == Fault::kRepeated) out = status(p_->unlink_clusters({info}).first);
    if (f == Fault::kDownAfter) down_now();
    if (out == "SUCCESS") {
      EXPECT_TRUE(p_->core()->links().empty());
    } else {
      // The server's finalize dropped both ends already; otherwise ours stays.
      EXPECT_EQ(p_->core()->links().size(), f == Fault::kPeerFinalized ? 0u : 1u)
          << "a failed unlink keeps our end";
      force_unlink_ = true;
    }
    restore();
    return out;
  }
  if (call == "link (comm domain)" || call == "unlink (comm domain)") return run_comm_domain(cell);
  if (call == "init") {
    auto dist =
        std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), LLMRole::PROMPT, 5);
    std::map<std::string, std::string> options =
        engine_options(platform_, 3, f == Fault::kBadAddress);
    options[impl::kOptionDeviceId] = "0";
    if (f == Fault::kOutOfMemory)
      options[impl::kOptionMemPoolConfig] = "{\"memory_size\": 107374182400}";
    if (f == Fault::kBadAddress) options[impl::kOptionListenIpInfo] = "192.168.77.1:26000";
    const int process = world_.platform().add_process({"c5", platform_.node_of(3), {3}});
    std::string out;
    world_.platform().run_as(process, [&] {
      out = outcome_of([&] { dist->init(options); });
      if (f == Fault::kRepeated) out = outcome_of([&] { dist->init(options); });
    });
    EXPECT_EQ(dist->initialized(), out == "ok");
    world_.platform().run_as(process, [&] { dist->finalize(); });
    return out;
  }
  // Calls local to P: the link's state must not matter.
  rig(call == "switch_role" ? false : true);
  if (link_fault) f == Fault::kDownBefore ? down_now() : degrade_now();
  WorldInventory before = take_inventory(world_);
  std::string out;
  if (call == "register_cache" || call == "register_blocks_cache") {
    const bool blocks = call == "register_blocks_cache";
    std::vector<std::uint64_t> addrs = alloc_tensors(0, small_, 9);
    extra_memory_ = addrs;
    before = take_inventory(world_);
    if (f == Fault::kBadAddress) addrs[1] = dcache_.addrs[0];  // D's memory, on another device
    auto reg = [&] {
      return blocks ? pm().register_blocks_cache(small_, addrs, impl::BlocksCacheKey{1, 3})
                    : pm().register_cache(small_, addrs);
    };
    out = outcome_of([&] { reg(); });
    if (f == Fault::kRepeated && out == "ok") {
      before = take_inventory(world_);
      out = outcome_of([&] { reg(); });
    }
  } else if (call == "unregister_cache") {
    if (f == Fault::kBadAddress) {
      out = outcome_of([&] { pm().unregister_cache(999); });
    } else if (f == Fault::kRepeated) {
      // A pull from D reads P's cache while P unregisters it.
      const std::int64_t id = psrc_.view.cache_id;
      world_.platform().spawn_as(d_->core()->process(), "reader", [this, id] {
        d_->cache_manager().pull_cache(impl::CacheKeyByIdAndIndex(1, id, 0), dcache_.view);
      });
      platform_.sleep(100 * kUs);
      out = outcome_of([&] { pm().unregister_cache(id); });
      platform_.sleep(10 * kUs * 1000);
      EXPECT_TRUE(same_bytes(snapshot(dcache_), snapshot(psrc_))) << "the reader's pull completed";
    } else {
      out = outcome_of([&] { pm().unregister_cache(psrc_.view.cache_id); });
    }
  } else if (call == "allocate_cache") {
    const impl::CacheDesc big = int8_desc(4, 2, 4 * static_cast<std::int64_t>(kMiB));  // 32 MiB
    out = outcome_of([&] { pm().allocate_cache(f == Fault::kOutOfMemory ? big : small_); });
    if (f == Fault::kRepeated && out == "ok") {
      before = take_inventory(world_);
      out = outcome_of([&] { pm().allocate_cache(small_); });
    }
  } else if (call == "deallocate_cache") {
    const impl::CacheView c = pm().allocate_cache(small_);
    before = take_inventory(world_);
    out = outcome_of([&] { pm().deallocate_cache(c); });
    if (f == Fault::kRepeated && out == "ok") out = outcome_of([&] { pm().deallocate_cache(c); });
  } else if (call == "copy_cache") {
    const TestCache other = register_cache(*p_, 0, cdesc_, 7);
    extra_memory_ = other.addrs;
    before = take_inventory(world_);
    impl::CacheView dst = other.view;
    if (f == Fault::kBadAddress) dst.cache_id = 999;
    out = outcome_of([&] { pm().copy_cache(dst, psrc_.view); });
    if (f == Fault::kRepeated && out == "ok")
      out = outcome_of([&] { pm().copy_cache(dst, psrc_.view); });
    if (out == "ok") {
      EXPECT_TRUE(same_bytes(snapshot(other), snapshot(psrc_)));
    }
  } else if (call == "allocate_blocks_cache") {
    const impl::CacheDesc big = int8_desc(4, 2, 4 * static_cast<std::int64_t>(kMiB));  // 32 MiB
    out = outcome_of([&] { pm().allocate_blocks_cache(f == Fault::kOutOfMemory ? big : small_); });
    if (f == Fault::kRepeated && out == "ok") {
      before = take_inventory(world_);
      out = outcome_of([&] { pm().allocate_blocks_cache(small_); });
    }
  } else if (call == "deallocate_blocks_cache") {
    const impl::CacheView c = pm().allocate_blocks_cache(small_);
    before = take_inventory(world_);
    impl::CacheView target = c;
    if (f == Fault::kBadAddress) target.cache_id = 999;
    out = outcome_of([&] { pm().deallocate_blocks_cache(target); });
    if (f == Fault::kRepeated && out == "ok") {
      out = outcome_of([&] { pm().deallocate_blocks_cache(c); });
    }
    if (f == Fault::kBadAddress) {
      EXPECT_EQ(describe_difference(before, take_inventory(world_)), "");
      pm().deallocate_blocks_cache(c);
    }
  } else if (call == "remove_cache_key") {
    // D pulls P's rows by key; a removed key can no longer be pulled (§4).
    const impl::CacheKey key{1, 77, 0};
    auto pull_by_key = [&](const TestCache& into) {
      return outcome_of([&] { d_->cache_manager().pull_cache(key, into.view); });
    };
    if (f == Fault::kBadAddress) {  // the key of a registered cache
      const TestCache keyed = register_cache(*p_, 0, small_, 11, false, std::nullopt, {key});
      extra_memory_ = keyed.addrs;
      const TestCache into = register_cache(*d_, 8, small_, 12);
      before = take_inventory(world_);
      out = outcome_of([&] { pm().remove_cache_key(key); });
      EXPECT_EQ(describe_difference(before, take_inventory(world_)), "");
      EXPECT_EQ(pull_by_key(into), "ok") << "the key stays";
      extra_memory_.insert(extra_memory_.end(), into.addrs.begin(), into.addrs.end());
    } else {
      const WorldInventory empty = take_inventory(world_);
      const impl::CacheView c = pm().allocate_cache(small_, {key});
      pm().deallocate_cache(c);  // the key keeps the memory until it is pulled or removed
      EXPECT_NE(describe_difference(empty, take_inventory(world_)), "");
      out = outcome_of([&] { pm().remove_cache_key(key); });
      if (f == Fault::kRepeated && out == "ok")
        out = outcome_of([&] { pm().remove_cache_key(key); });
      EXPECT_EQ(describe_difference(empty, take_inventory(world_)), "") << "freed with its key";
      restore();  // the pull below needs the path
      const TestCache into = register_cache(*d_, 8, small_, 12);
      EXPECT_EQ(pull_by_key(into), "raises KV_CACHE_NOT_EXIST");
      extra_memory_ = into.addrs;
    }
  } else if (call == "copy_blocks") {
    const TestCache blocks = register_cache(*p_, 0, small_, 13, true);
    extra_memory_ = blocks.addrs;
    before = take_inventory(world_);
    const std::map<std::int64_t, std::vector<std::int64_t>> info =
        f == Fault::kBadAddress ? std::map<std::int64_t, std::vector<std::int64_t>>{{0, {8}}}
                                : std::map<std::int64_t, std::vector<std::int64_t>>{{0, {3, 5}}};
    const std::vector<std::uint8_t> image = snapshot(blocks);
    out = outcome_of([&] { pm().copy_blocks(blocks.view, info); });
    if (f == Fault::kRepeated && out == "ok") {
      out = outcome_of([&] { pm().copy_blocks(blocks.view, info); });
    }
    const std::uint64_t block = small_.size() / 8;
    for (std::size_t t = 0; t < blocks.addrs.size(); ++t) {
      const std::uint64_t base = t * small_.size();
      for (std::uint64_t b = 0; b < 8; ++b) {
        const bool written = out == "ok" && (b == 3 || b == 5);
        const std::uint64_t from = base + (written ? 0 : b) * block;
        EXPECT_EQ(
            read(blocks.addrs[t] + b * block, block),
            std::vector<std::uint8_t>(image.begin() + static_cast<std::ptrdiff_t>(from),
                                      image.begin() + static_cast<std::ptrdiff_t>(from + block)))
            << "tensor " << t << " block " << b;
      }
    }
  } else if (call == "swap_blocks") {
    const impl::CacheDesc host = int8_desc(2, 8, 256 * 1024, impl::Placement::HOST);
    const TestCache dev = register_cache(*p_, 0, small_, 14, true);
    TestCache cpu{impl::CacheView{-1, host}, alloc_tensors(0, host, 15)};
    cpu.view.is_blocks_cache = true;
    cpu.view.tensor_addrs = cpu.addrs;
    extra_memory_ = dev.addrs;
    extra_memory_.insert(extra_memory_.end(), cpu.addrs.begin(), cpu.addrs.end());
    before = take_inventory(world_);
    const impl::CacheView& dst = f == Fault::kBadAddress ? dev.view : cpu.view;
    out = outcome_of([&] { pm().swap_blocks(dev.view, dst, {{1, 6}}); });
    if (f == Fault::kRepeated && out == "ok") {
      out = outcome_of([&] { pm().swap_blocks(dev.view, dst, {{1, 6}}); });
    }
    if (out == "ok") {
      const std::uint64_t block = small_.size() / 8;
      for (std::size_t t = 0; t < dev.addrs.size(); ++t) {
        EXPECT_EQ(read(cpu.addrs[t] + 6 * block, block), read(dev.addrs[t] + 1 * block, block));
      }
    }
  } else if (call == "switch_role") {
    out = outcome_of([&] { p_->switch_role(LLMRole::DECODER); });
    if (f == Fault::kRepeated && out == "ok")
      out = outcome_of([&] { p_->switch_role(LLMRole::DECODER); });
  } else if (call == "finalize") {
    if (f == Fault::kPeerFinalized) d_->finalize();
    if (f == Fault::kPeerGone) {
      d_->abandon("killed");
      peer_dead_ = true;
    }
    out = outcome_of([&] { p_->finalize(); });
    if (f == Fault::kRepeated) out = outcome_of([&] { p_->finalize(); });
    EXPECT_FALSE(p_->initialized());
  } else {
    ADD_FAILURE() << "no such call " << call;
  }
  if (out != "ok") {
    EXPECT_EQ(describe_difference(before, take_inventory(world_)), "")
        << "a rejected call leaves everything as it was";
  }
  restore();
  return out;
}

// What a careful program does at the end: unlink, unregister, finalize, free what it allocated.
// A dead peer's memory is freed as its operating system would.
void FaultMatrix::clean_up() {
  world_.platform().run_until_idle();
  for (impl::LLMDataDist* dist : {p_.get(), d_.get()}) {
    if (!dist || !dist->initialized()) continue;
    for (const auto& [peer, link] : std::map(dist->core()->links())) {
      impl::LLMClusterInfo info =
          dist == p_.get() ? cluster_info(peer, 8) : cluster_info(peer, 0, 8);
      dist->unlink_clusters({info}, 3000, force_unlink_ || peer_dead_ || dist == d_.get());
    }
    for (const auto& [id, entry] : std::map(dist->core()->caches().entries())) {
      if (entry.registered) dist->cache_manager().unregister_cache(id);
    }
    dist->finalize();
  }
  for (const TestCache* c : {&psrc_, &pblocks_, &dcache_, &dblocks_}) {
    for (std::uint64_t a : c->addrs) platform_.free(a);
  }
  for (std::uint64_t a : extra_memory_) platform_.free(a);
}

// Two engines the fault never touched link, pull and check the bytes.
void FaultMatrix::expect_bystanders_transfer() {
  auto a = make_dist(LLMRole::PROMPT, 3, 1, false);
  auto b = make_dist(LLMRole::DECODER, 4, 9, true);
  const impl::CacheDesc desc = int8_desc(2, 1, 64 * 1024);
  const TestCache src = register_cache(*b, 9, desc, 11);
  const TestCache dst = register_cache(*a, 1, desc, 12);
  link(*a, 4, 9);
  a->cache_manager().pull_cache(impl::CacheKeyByIdAndIndex(4, src.view.cache_id, 0), dst.view);
  EXPECT_TRUE(same_bytes(snapshot(dst), snapshot(src)));
  a->unlink_clusters({cluster_info(4, 9, 1)});
  a->finalize();
  b->finalize();
  for (const TestCache* c : {&src, &dst}) {
    for (std::uint64_t x : c->addrs) platform_.free(x);
  }
}

TEST_P(FaultMatrix, Cell) {
  const Cell& cell = GetParam();
  const std::string out = run_cell(cell);
  EXPECT_EQ(out, cell.expected) << cell.call << " / " << fault_name(cell.fault) << ": "
                                << cell.rule;
  clean_up();
  expect_bystanders_transfer();
  EXPECT_EQ(describe_difference(baseline_, take_inventory(world_)), "")
      << "the world must be back to its first inventory";
}

std::string cell_name(const ::testing::TestParamInfo<Cell>& info) {
  std::string name = std::string(info.param.call) + "_" + fault_name(info.param.fault);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cells, FaultMatrix, ::testing::ValuesIn(cells()), cell_name);

// The README's table, made from cells(): a row per call, a column per fault.
std::string markdown_table() {
  std::vector<std::string> calls;
  for (const Cell& c : cells()) {
    if (std::find(calls.begin(), calls.end(), c.call) == calls.end()) calls.push_back(c.call);
  }
  std::ostringstream out;
  out << "| call |";
  for (Fault f : kFaults) out << " " << fault_name(f) << " |";
  out << "\n|---|";
  for (std::size_t i = 0; i < std::size(kFaults); ++i) out << "---|";
  out << "\n";
  for (const std::string& call : calls) {
    out << "| `" << call << "` |";
    for (Fault f : kFaults) {
      std::string text = "·";
      for (const Cell& c : cells()) {
        if (c.call == call && c.fault == f) text = c.expected;
      }
      out << " " << text << " |";
    }
    out << "\n";
  }
  return out.str();
}

TEST(FaultMatrixTable, ReadmeShowsTheMatrixTheTestRuns) {
  const std::string table = markdown_table();
  std::ofstream("fault_matrix.md") << table;
  std::ifstream readme(std::string(KVSIM_SOURCE_DIR) + "/README.md");
  std::stringstream text;
  text << readme.rdbuf();
  const std::string s = text.str();
  const std::string begin = "<!-- fault-matrix: made by sim/tests/fault_matrix_test.cpp -->\n";
  const std::string end = "<!-- /fault-matrix -->";
  const auto a = s.find(begin);
  const auto b = s.find(end);
  ASSERT_NE(a, std::string::npos) << "README lacks the fault-matrix block";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(s.substr(a + begin.size(), b - a - begin.size()), table)
      << "README's fault matrix differs from the test's; the test's is in fault_matrix.md beside "
         "the test binary";
}

}  // namespace
}  // namespace kvsim::sim::testing
