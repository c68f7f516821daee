#include "impl/llm_datadist.h"

#include "impl/lock_guard.h"

namespace kvsim::impl {

namespace {

// Checks that a listen address is the device's own (§5: this side listens on its device NIC).
void check_listen_ip(Platform& platform, int device, const std::optional<IpInfo>& listen,
                     const char* key) {
  if (!listen) return;
  const std::string ip = int_to_ip(listen->ip);
  if (platform.device_by_ip(ip) != device) {
    throw_param_invalid(key, ip + " is not the address of device " + std::to_string(device) + " (" +
                                 platform.device_ip(device) + ")");
  }
}

}  // namespace

LLMDataDist::LLMDataDist(Platform& platform, Directory& directory, LLMRole role,
                         std::uint64_t cluster_id)
    : platform_(platform), directory_(directory), role_(role), cluster_id_(cluster_id) {
  if (!is_valid(role)) throw TypeError("role", "must be an LLMRole");
}

LLMDataDist::~LLMDataDist() {
  if (!initialized()) return;
  drop_all_comm_domains(*core_);
  for (const auto& [peer, link] : core_->links()) {
    link->set_down();
    if (const std::shared_ptr<DataDistCore> p = directory_.find_cluster(peer)) {
      const auto it = p->links().find(cluster_id_);
      if (it != p->links().end()) {
        it->second->set_down();
        p->links().erase(it);
      }
    }
  }
  core_->links().clear();
  core_->set_finalized();
  directory_.remove(*core_);
}

DataDistCore& LLMDataDist::live(const char* api) const {
  check_initialized(initialized(), std::string("LLMDataDist.") + api);
  return *core_;
}

void LLMDataDist::init(const std::map<std::string, std::string>& options) {
  if (initialized()) {
    throw LLMException(LLMStatusCode::LLM_FAILED, "init", "Cannot init multiple LLMDataDists");
  }
  const EngineOptions engine = parse_engine_options(options);
  const KvsimSettings settings = parse_kvsim_settings(options);
  if (engine.device_id >= platform_.device_count()) {
    throw_param_invalid(kOptionDeviceId, std::to_string(engine.device_id) +
                                             " is not a device of this world (" +
                                             std::to_string(platform_.device_count()) + ")");
  }
  check_listen_ip(platform_, engine.device_id, engine.listen_ip_info, kOptionListenIpInfo);
  if (engine.listen_ip_info && directory_.find_listener(*engine.listen_ip_info)) {
    throw LLMException(LLMStatusCode::LLM_FAILED, kOptionListenIpInfo,
                       "address already in use by another LLMDataDist");
  }
  if (directory_.find_cluster(cluster_id_)) {
    throw_param_invalid("cluster_id", "cluster " + std::to_string(cluster_id_) +
                                          " is already initialized in this world");
  }
  auto core =
      std::make_shared<DataDistCore>(platform_, directory_, cluster_id_, role_, engine, settings);
  std::vector<std::uint64_t> bases;
  const auto add_pool = [&](const std::optional<MemPoolConfig>& cfg, Placement placement,
                            const char* key) {
    if (!cfg) return;
    const std::optional<std::uint64_t> base = platform_.allocate(
        engine.device_id, placement, cfg->memory_size, std::uint64_t{1} << cfg->page_shift);
    if (!base) {
      for (std::uint64_t b : bases) platform_.free(b);
      throw LLMException(LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY, key,
                         "memory_size " + std::to_string(cfg->memory_size) +
                             " does not fit the memory of device " +
                             std::to_string(engine.device_id));
    }
    bases.push_back(*base);
    core->set_pool(placement, *base, *cfg);
  };
  add_pool(engine.mem_pool, Placement::DEVICE, kOptionMemPoolConfig);
  add_pool(engine.host_mem_pool, Placement::HOST, kOptionHostMemPoolConfig);
  directory_.add(core);
  core_ = core;
  pool_bases_ = std::move(bases);
  cache_manager_ = std::make_unique<CacheManager>(core_);
  kv_cache_manager_ = std::make_unique<KvCacheManager>(core_);
}

void LLMDataDist::release_pools() {
  for (std::uint64_t base : pool_bases_) platform_.free(base);
  pool_bases_.clear();
}

void LLMDataDist::finalize() {
  if (!initialized()) return;
  DataDistCore& core = *core_;
  if (core.tasks_in_flight > 0) {
    core.flag(DiagnosticKind::kFinalizeWhileBusy,
              std::to_string(core.tasks_in_flight) +
                  " transfer_cache_async task(s) still in flight; their later layers fail",
              "finalize");
  }
  { LockGuard wait_for_layer(core.transfer_mutex()); }
  drop_all_comm_domains(core);
  drop_all_links(core);
  core.set_finalized();
  directory_.remove(core);
  release_pools();
}

CacheManager& LLMDataDist::cache_manager() {
  const DataDistCore& core = live("cache_manager");
  if (core.version() != ApiVersion::kV2) {
    throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "cache_manager",
                       "needs llm.EnableCacheManager (kvsim.ApiVersion 2)");
  }
  return *cache_manager_;
}

KvCacheManager& LLMDataDist::kv_cache_manager() {
  const DataDistCore& core = live("kv_cache_manager");
  if (core.version() != ApiVersion::kV1) {
    throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "kv_cache_manager",
                       "is the v1 API; set kvsim.ApiVersion to 1");
  }
  return *kv_cache_manager_;
}

LinkResult LLMDataDist::link_clusters(const std::vector<LLMClusterInfo>& clusters,
                                      std::int64_t timeout) {
  return impl::link_clusters(live("link_clusters"), clusters, timeout);
}

LinkResult LLMDataDist::unlink_clusters(const std::vector<LLMClusterInfo>& clusters,
                                        std::int64_t timeout, bool force) {
  DataDistCore& core = live("unlink_clusters");
  check_uint32("timeout", timeout);
  return impl::unlink_clusters(core, clusters, timeout, force);
}

void LLMDataDist::check_comm_domain_api(const std::string& api) const {
  const DataDistCore& core = live(api.c_str());
  if (core.version() != ApiVersion::kV2) {
    throw_param_invalid(api, "is not supported when llm.EnableCacheManager is not configured.");
  }
}

std::uint64_t LLMDataDist::link(const std::string& comm_name,
                                const ClusterRankInfo& cluster_rank_info,
                                const std::string& rank_table) {
  check_comm_domain_api("link");
  return link_comm_domain(*core_, comm_name, cluster_rank_info, rank_table);
}

void LLMDataDist::unlink(std::uint64_t comm_id) {
  check_comm_domain_api("unlink");
  unlink_comm_domain(*core_, comm_id);
}

RegisterMemStatus LLMDataDist::query_register_mem_status(std::uint64_t comm_id) {
  check_comm_domain_api("query_register_mem_status");
  return query_comm_domain(*core_, comm_id);
}

void LLMDataDist::switch_role(LLMRole role, const std::map<std::string, std::string>& options) {
  DataDistCore& core = live("switch_role");
  if (!is_valid(role)) throw TypeError("role", "must be an LLMRole");
  if (!core.options().enable_switch_role) {
    throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "switch_role",
                       "needs llm.EnableSwitchRole");
  }
  if (core.any_link() || !core.comm_domains().empty()) {
    throw LLMException(LLMStatusCode::LLM_EXIST_LINK, "switch_role",
                       std::to_string(core.links().size()) + " link(s) and " +
                           std::to_string(core.comm_domains().size()) +
                           " comm domain(s) remain; unlink first");
  }
  std::optional<IpInfo> listen;
  if (role == LLMRole::PROMPT) {
    const auto it = options.find(kOptionListenIpInfo);
    if (it != options.end()) {
      const EngineOptions parsed = parse_engine_options(
          {{kOptionDeviceId, std::to_string(core.device())}, {kOptionListenIpInfo, it->second}});
      check_listen_ip(platform_, core.device(), parsed.listen_ip_info, kOptionListenIpInfo);
      listen = parsed.listen_ip_info;
    } else {
      listen = core.options().listen_ip_info;
    }
  }
  core.set_listen_ip_info(listen);
  core.set_role(role);
}

}  // namespace kvsim::impl
