// One side of a link between two clusters (spec §3.4, §9): the per-link mutex that pull_*,
// transfer_cache_async's per-layer calls and unlink share, and the remote cache table that
// remote-accessible mode caches at first access (§5).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "impl/copy_geometry.h"
#include "impl/platform.h"
#include "impl/types.h"

namespace kvsim::impl {

/// What a link knows of one remote cache.
struct RemoteCacheInfo {
  CacheGeometry geometry;
  Placement placement = Placement::DEVICE;
  bool is_blocks_cache = false;
  bool mix = false;  ///< A C++ registration: contiguous and blocks at once.
  std::optional<BlocksCacheKey> blocks_key{};
};

/// The peer's caches by id, as read at the first remote-accessible access (§5: later remote
/// changes are not seen).
using RemoteCacheTable = std::map<std::int64_t, RemoteCacheInfo>;

/// This process's end of a link to `peer_cluster_id`.
class Link {
 public:
  Link(std::uint64_t peer_cluster_id, int peer_device, std::unique_ptr<Mutex> mutex)
      : peer_cluster_id_(peer_cluster_id), peer_device_(peer_device), mutex_(std::move(mutex)) {}

  std::uint64_t peer_cluster_id() const { return peer_cluster_id_; }
  int peer_device() const { return peer_device_; }
  /// The per-link mutex (§3.4): held by a pull, by one per-layer transfer, and by unlink (hixl
  /// data_cache_engine.cc: DataCacheEngine::PullCache and ::TransferCache both lock
  /// CommEntity::GetPullMutex(), so on one link they wait for each other; no LLM_LINK_BUSY).
  Mutex& mutex() { return *mutex_; }
  /// False once unlinked; an operation that waited on the mutex re-checks it.
  bool up() const { return up_; }
  void set_down() { up_ = false; }
  /// Why the peer's process is gone, if it ended holding the link without finalizing (it
  /// crashed, or exited with its LlmDataDist alive): the link stays, as nothing told this side,
  /// but no transfer over it reaches the peer's memory any more.
  const std::string& peer_lost() const { return peer_lost_; }
  void set_peer_lost(std::string why) { peer_lost_ = std::move(why); }
  /// Why a transport failure left this link unusable until it is unlinked and linked again
  /// (empty: usable). See mark_transport_failure.
  const std::string& transport_failure() const { return transport_failure_; }
  void set_transport_failure(std::string why) { transport_failure_ = std::move(why); }
  /// query_register_mem_status: OK once the link is set up (kvsim exchanges memory at link time).
  RegisterMemStatus register_status() const {
    return up_ ? RegisterMemStatus::OK : RegisterMemStatus::FAILED;
  }
  /// The cached remote cache table, if read already.
  std::optional<RemoteCacheTable>& remote_table() { return remote_table_; }

  /// pull_* calls in progress on this link (v1 overlap diagnostics, §3.5).
  int active_pulls = 0;
  /// v1 transfer_cache_async tasks in flight that target this link's peer (§3.5).
  int active_v1_transfers = 0;

 private:
  std::uint64_t peer_cluster_id_;
  int peer_device_;
  std::unique_ptr<Mutex> mutex_;
  bool up_ = true;
  std::string peer_lost_;
  std::string transport_failure_;
  std::optional<RemoteCacheTable> remote_table_;
};

}  // namespace kvsim::impl
