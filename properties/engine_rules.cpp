#include "properties/engine_rules.h"

#include "impl/types.h"

namespace kvsim::properties::engine_rules {

std::map<std::string, std::string> InitOptions::to_map() const {
  std::map<std::string, std::string> out;
  if (enable_cache_manager)
    out[impl::kOptionEnableCacheManager] = *enable_cache_manager ? "1" : "0";
  if (local_comm_res) out[impl::kOptionLocalCommRes] = "";
  if (remote_accessible) {
    out[impl::kOptionEnableRemoteCacheAccessible] = *remote_accessible ? "1" : "0";
  }
  if (transfer_backend) out[impl::kOptionTransferBackend] = *transfer_backend;
  return out;
}

void showValue(const InitOptions& o, std::ostream& os) {
  os << "{";
  const char* sep = "";
  for (const auto& [k, v] : o.to_map()) {
    os << sep << k << ": \"" << v << "\"";
    sep = ", ";
  }
  if (o.listen) os << sep << "llm.listenIpInfo: its own";
  os << "}";
}

Engine init(const InitOptions& o) {
  Engine e;
  // _setup_engine_option: llm.LocalCommRes turns llm.EnableCacheManager and
  // llm.EnableRemoteCacheAccessible on unless they are given.
  const bool cache_manager = o.enable_cache_manager.value_or(o.local_comm_res);
  bool remote = o.remote_accessible.value_or(o.local_comm_res);
  e.v2 = cache_manager;
  // _check_is_cache_mgr_mode("llm.LocalCommRes").
  if (o.local_comm_res && !cache_manager) {
    e.error = LLMStatusCode::LLM_PARAM_INVALID;
    return e;
  }
  if (o.transfer_backend) {
    // llm.TransferBackend needs the cache manager, remote-accessible caches (on unless given)
    // and a listen address, in this order.
    if (!cache_manager) {
      e.error = LLMStatusCode::LLM_PARAM_INVALID;
      return e;
    }
    if (!o.remote_accessible) remote = true;
    if (!remote || !o.listen) {
      e.error = LLMStatusCode::LLM_PARAM_INVALID;
      return e;
    }
    // TransferEngineFactory::Create knows "hixl" only; init then fails.
    if (*o.transfer_backend != "hixl") {
      e.error = LLMStatusCode::LLM_FAILED;
      return e;
    }
    e.hixl = true;
  }
  // v1 (LLMDataDist.init → EngineConfig.gen_cluster_info_if_not_exist): a prompt needs its
  // listen address ("neither llm.ClusterInfo nor llm.listenIp was specified").
  if (!cache_manager && o.prompt && !o.listen) {
    e.error = LLMStatusCode::LLM_PARAM_INVALID;
    return e;
  }
  e.remote = cache_manager && remote;
  return e;
}

std::optional<LLMStatusCode> manager_error(const Engine& engine, bool v2_api) {
  if (engine.v2 == v2_api) return std::nullopt;
  return LLMStatusCode::LLM_PARAM_INVALID;
}

}  // namespace kvsim::properties::engine_rules
