// LLMDataDist (spec §4): one per simulated host process, bound to one device; lifecycle, links,
// role, and the cache managers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "impl/cache_manager.h"
#include "impl/cluster_links.h"
#include "impl/comm_domain.h"
#include "impl/data_dist_core.h"
#include "impl/directory.h"
#include "impl/kv_cache_manager.h"
#include "impl/platform.h"

namespace kvsim::impl {

/// The llm_datadist entry point of one simulated process.
class LLMDataDist {
 public:
  /// TypeError for a role that is not an LLMRole.
  LLMDataDist(Platform& platform, Directory& directory, LLMRole role, std::uint64_t cluster_id,
              FrontEnd front_end = FrontEnd::kPython);
  /// Leaves the world (links dropped on both sides, no simulated time passes). Pool memory is
  /// not returned to the platform, since jobs of this process may still be running.
  ~LLMDataDist();
  LLMDataDist(const LLMDataDist&) = delete;
  LLMDataDist& operator=(const LLMDataDist&) = delete;

  /// init(options) (§5): parse_engine_options and kvsim.Strict; the generation from
  /// llm.EnableCacheManager (§1). A no-op when already initialized. LLM_FAILED "Cannot init
  /// multiple LLMDataDists" if another instance of the same launched process is initialized
  /// (§2.3; in a script that was not launched: a kSeveralDataDistsInProcess diagnostic);
  /// LLM_PARAM_INVALID for a logical device the process lacks or a cluster id already in the
  /// world; LLM_FAILED for a listen address its host cannot bind (check_bindable);
  /// LLM_DEVICE_OUT_OF_MEMORY if a memory pool does not fit the device.
  void init(const std::map<std::string, std::string>& options);
  /// finalize (§4): waits for the per-layer call in progress, drops every link, frees the pools.
  /// With tasks in flight: a kFinalizeWhileBusy diagnostic (strict: raised, nothing done);
  /// their later per-layer calls give LLM_FAILED (§3.4). No-op before init.
  void finalize();
  /// The process died holding this initialized instance (it crashed, or exited without its
  /// destructor running): it leaves the world as the library's would, without telling anyone.
  /// Its listener closes and its link ends go; each peer's end stays but is lost
  /// (abandon_all_links), so the peer's next transfer over it fails with kCopyFailedStatus,
  /// and its non-forced unlink finds nobody listening. Memory stays allocated: peers' copies
  /// in flight still land. No simulated time passes. No-op before init.
  void abandon(const std::string& why);
  bool initialized() const { return core_ && core_->initialized(); }

  /// The v2 CacheManager. RuntimeError before init; LLM_PARAM_INVALID "... is not supported when
  /// llm.EnableCacheManager is not configured." under v1.
  CacheManager& cache_manager();
  /// The v1 KvCacheManager. RuntimeError before init; LLM_PARAM_INVALID under v2.
  KvCacheManager& kv_cache_manager();

  /// link_clusters(clusters, timeout=3000) (§4); see impl::link_clusters.
  LinkResult link_clusters(const std::vector<LLMClusterInfo>& clusters,
                           std::int64_t timeout = 3000);
  /// unlink_clusters(clusters, timeout=3000, force=False) (§4). The wait for the link's mutex is
  /// not bounded by `timeout`, as the library's lock is not; v1's link-operation lock is (see
  /// impl::LinkOpLock).
  LinkResult unlink_clusters(const std::vector<LLMClusterInfo>& clusters,
                             std::int64_t timeout = 3000, bool force = false);
  /// link(comm_name, cluster_rank_info, rank_table) -> comm_id (§4); see impl::link_comm_domain.
  std::uint64_t link(const std::string& comm_name, const ClusterRankInfo& cluster_rank_info,
                     const std::string& rank_table);
  /// unlink(comm_id) (§4); see impl::unlink_comm_domain.
  void unlink(std::uint64_t comm_id);
  /// query_register_mem_status(comm_id) (§4); see impl::query_comm_domain.
  RegisterMemStatus query_register_mem_status(std::uint64_t comm_id);
  /// The checks link, unlink and query_register_mem_status make first: RuntimeError before init,
  /// LLM_PARAM_INVALID "<api> is not supported when llm.EnableCacheManager is not configured."
  /// under v1 (for bindings that check argument types after them, in the real Python's order).
  void check_comm_domain_api(const std::string& api) const;

  /// switch_role(role, options={}) (§4). v2: LLM_EXIST_LINK with links or comm domains ([I]:
  /// until unlink, even FAILED ones); then with llm.listenIpInfo in options it listens there,
  /// without it stops listening (LLMLinkManager::SwitchRole). v1: LLM_PARAM_INVALID for the same
  /// role or a switch to PROMPT without llm.listenIpInfo, LLM_FEATURE_NOT_ENABLED without
  /// llm.EnableSwitchRole. hixl backend: only the init listen address, no link check.
  void switch_role(LLMRole role, const std::map<std::string, std::string>& options = {});

  std::uint64_t cluster_id() const { return cluster_id_; }
  LLMRole role() const { return core_ ? core_->role() : role_; }
  /// The engine state (tests, the Python module); nullptr before init.
  const std::shared_ptr<DataDistCore>& core() const { return core_; }

 private:
  DataDistCore& live(const char* api) const;
  void check_generation(const char* api, ApiVersion wanted) const;
  int visible_device_count() const;
  void release_pools();

  Platform& platform_;
  Directory& directory_;
  LLMRole role_;
  std::uint64_t cluster_id_;
  FrontEnd front_end_;
  std::shared_ptr<DataDistCore> core_;
  std::unique_ptr<CacheManager> cache_manager_;
  std::unique_ptr<KvCacheManager> kv_cache_manager_;
  std::vector<std::uint64_t> pool_bases_;
};

}  // namespace kvsim::impl
