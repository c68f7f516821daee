#include "impl/llm_datadist.h"

#include "impl/listen_address.h"
#include "impl/lock_guard.h"

namespace kvsim::impl {

LLMDataDist::LLMDataDist(Platform& platform, Directory& directory, LLMRole role,
                         std::uint64_t cluster_id, FrontEnd front_end)
    : platform_(platform),
      directory_(directory),
      role_(role),
      cluster_id_(cluster_id),
      front_end_(front_end) {
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
  // hixl v2/llm_datadist.py LLMDataDist.init: a second init of one object returns at once; a
  // second object of the same process raises (the class attribute llm_engine_instance).
  if (initialized()) return;
  const int process = platform_.current_process();
  const std::shared_ptr<DataDistCore> sibling = directory_.find_process(process);
  if (sibling && process != kScriptProcess && front_end_ == FrontEnd::kPython) {
    throw LLMException(LLMStatusCode::LLM_FAILED, "init", "Cannot init multiple LLMDataDists");
  }
  EngineOptions engine = parse_engine_options(options);
  KvsimSettings settings = parse_kvsim_settings(options, engine);
  settings.front_end = front_end_;
  if (settings.version == ApiVersion::kV1) {
    // EngineConfig.gen_cluster_info_if_not_exist (hixl v2/config.py): v1 reads the device list,
    // and a prompt needs its listen address (it is the server of v1's directional links).
    if (options.count(kOptionDeviceId) == 0) {
      throw_param_invalid(kOptionDeviceId,
                          "neither llm.ClusterInfo nor ge.exec.deviceId was "
                          "specified");
    }
    if (role_ == LLMRole::PROMPT && !engine.listen_ip_info) {
      throw_param_invalid(kOptionListenIpInfo,
                          "neither llm.ClusterInfo nor llm.listenIp was specified");
    }
  }
  const int logical = engine.device_id;
  engine.device_id = platform_.resolve_device(logical);
  if (engine.device_id < 0) {
    throw_param_invalid(kOptionDeviceId, std::to_string(logical) +
                                             " is not a device of this process (it sees " +
                                             std::to_string(visible_device_count()) + ")");
  }
  if (directory_.find_cluster(cluster_id_)) {
    throw_param_invalid("cluster_id", "cluster " + std::to_string(cluster_id_) +
                                          " is already initialized in this world");
  }
  auto core = std::make_shared<DataDistCore>(platform_, directory_, process, cluster_id_, role_,
                                             engine, settings);
  if (sibling && front_end_ == FrontEnd::kCpp) {
    // llm_datadist_impl.cc does not refuse a second instance, but every instance of a process
    // shares its singletons (GlobalMemManager, CommAdapter): behaviour the library leaves open.
    core->flag(DiagnosticKind::kSeveralDataDistsInProcess,
               "cluster " + std::to_string(cluster_id_) + " is a second LlmDataDist of this " +
                   "process (cluster " + std::to_string(sibling->cluster_id()) +
                   " is initialized); the library's instances of one process share its " +
                   "process-wide state",
               "Initialize");
  } else if (sibling) {
    core->flag(DiagnosticKind::kSeveralDataDistsInProcess,
               "cluster " + std::to_string(cluster_id_) +
                   " is a second LLMDataDist of this "
                   "script (cluster " +
                   std::to_string(sibling->cluster_id()) +
                   " is initialized); "
                   "on hardware init raises LLMException(LLM_FAILED) \"Cannot init multiple "
                   "LLMDataDists\": one per process, as `kvsim launch` runs programs",
               "init");
  }
  if (engine.listen_ip_info) check_bindable(*core, *engine.listen_ip_info, kOptionListenIpInfo);
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
                             " does not fit the memory of device " + std::to_string(logical));
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

int LLMDataDist::visible_device_count() const {
  int n = 0;
  while (platform_.resolve_device(n) >= 0) ++n;
  return n;
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

void LLMDataDist::abandon(const std::string& why) {
  if (!initialized()) return;
  DataDistCore& core = *core_;
  drop_all_comm_domains(core);
  abandon_all_links(core, why);
  core.set_finalized();
  directory_.remove(core);
}

// hixl v2/llm_datadist.py _check_is_cache_mgr_mode / _check_is_not_cache_mgr_mode.
void LLMDataDist::check_generation(const char* api, ApiVersion wanted) const {
  const DataDistCore& core = live(api);
  if (core.version() == wanted) return;
  throw_param_invalid(
      api, std::string(api) + (wanted == ApiVersion::kV2
                                   ? " is not supported when llm.EnableCacheManager is not "
                                     "configured."
                                   : " is not supported when llm.EnableCacheManager is "
                                     "configured."));
}

CacheManager& LLMDataDist::cache_manager() {
  check_generation("cache_manager", ApiVersion::kV2);
  return *cache_manager_;
}

KvCacheManager& LLMDataDist::kv_cache_manager() {
  check_generation("kv_cache_manager", ApiVersion::kV1);
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
  check_generation(api.c_str(), ApiVersion::kV2);
  // HixlTransferEngine: Link / Unlink / QueryRegisterMemStatus by comm id are not offered.
  if (core_->hixl()) {
    throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, api,
                       "is not supported with llm.TransferBackend \"hixl\"");
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
  std::optional<IpInfo> listen;
  if (const auto it = options.find(kOptionListenIpInfo); it != options.end()) {
    listen = parse_engine_options({{kOptionListenIpInfo, it->second}}).listen_ip_info;
  }
  const std::optional<IpInfo> current = core.options().listen_ip_info;
  if (core.version() == ApiVersion::kV1) {
    // hicann/ge api/python/llm_datadist_v1/llm_datadist.py switch_role, and
    // dflow/llm_datadist/v1/llm_datadist.cc Impl::SwitchRole (needs llm.EnableSwitchRole).
    if (role == core.role()) {
      throw_param_invalid("role", "role not changed, role = " + std::string(to_string(role)));
    }
    if (role == LLMRole::PROMPT && !listen) {
      throw_param_invalid("switch_options",
                          "Failed to switch to Prompt, option "
                          "\"llm.listenIpInfo\" must be specified");
    }
    if (!core.options().enable_switch_role) {
      throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "switch_role",
                         "Option llm.EnableSwitchRole not enabled");
    }
  } else if (core.hixl()) {
    // HixlTransferEngine::SwitchRole: only a listen address equal to init's; no link check, the
    // listener stays.
    if (listen && (!current || !(*listen == *current))) {
      throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, kOptionListenIpInfo,
                         "the hixl backend keeps the listen address given at init");
    }
    core.set_role(role);
    return;
  }
  // LLMLinkManager::SwitchRole (v2; llm.EnableSwitchRole is not read): no link may remain.
  if (core.any_link() || !core.comm_domains().empty()) {
    throw LLMException(LLMStatusCode::LLM_EXIST_LINK, "switch_role",
                       std::to_string(core.links().size()) + " link(s) and " +
                           std::to_string(core.comm_domains().size()) +
                           " comm domain(s) remain; unlink first");
  }
  // With a listen address: listen there (a listener on the same port stays as it is). Without:
  // stop listening, whatever the new role.
  if (listen && !(current && current->port == listen->port)) {
    core.set_listen_ip_info(std::nullopt);
    try {
      check_bindable(core, *listen, kOptionListenIpInfo);
    } catch (...) {
      core.set_listen_ip_info(current);
      throw;
    }
    core.set_listen_ip_info(listen);
  } else if (!listen) {
    core.set_listen_ip_info(std::nullopt);
  }
  core.set_role(role);
}

}  // namespace kvsim::impl
