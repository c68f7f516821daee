// The library's rules for LLMDataDist.init options, as a pure function the property suites use to
// predict a case's engine from the options they generate: which API generation (v1 KvCacheManager
// or v2 CacheManager), whether caches are remote accessible, which transfer backend, or which
// error init raises. Read from hicann/hixl src/python/llm_datadist/llm_datadist/v2/
// llm_datadist.py (LLMDataDist.init, _setup_engine_option), v2/config.py
// (EngineConfig.gen_cluster_info_if_not_exist) and src/llm_datadist/transfer_engine/
// transfer_engine.cc (TransferEngineFactory::Create). No impl code, no simulation.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "impl/status.h"

namespace kvsim::properties::engine_rules {

using impl::LLMStatusCode;

/// The generation-related options a case passes to init (every other option is the harness's).
struct InitOptions {
  std::optional<bool> enable_cache_manager{};     ///< llm.EnableCacheManager "1"/"0", or absent
  bool local_comm_res = false;                    ///< llm.LocalCommRes given (as "")
  std::optional<bool> remote_accessible{};        ///< llm.EnableRemoteCacheAccessible, or absent
  std::optional<std::string> transfer_backend{};  ///< llm.TransferBackend, or absent
  bool listen = false;  ///< llm.listenIpInfo given (the harness's own address)
  bool prompt = false;  ///< constructed with role PROMPT (else DECODER)
  /// The option map (without llm.listenIpInfo, which the harness adds when `listen`).
  std::map<std::string, std::string> to_map() const;
};

/// The options as a map literal (the role is not shown).
void showValue(const InitOptions& o, std::ostream& os);

/// What init gives: the status of the LLMException it raises, or the engine it builds.
struct Engine {
  std::optional<LLMStatusCode> error{};  ///< nullopt: initialized
  bool v2 = false;      ///< CacheManager (llm.EnableCacheManager "1"), else KvCacheManager
  bool remote = false;  ///< llm.EnableRemoteCacheAccessible in force
  bool hixl = false;    ///< llm.TransferBackend "hixl": one-sided links
};

/// init(options) as the library decides it.
Engine init(const InitOptions& o);

/// The status cache_manager (`v2_api`) or kv_cache_manager raises on `engine`, or nullopt: the
/// Python properties' _check_is_cache_mgr_mode / _check_is_not_cache_mgr_mode.
std::optional<LLMStatusCode> manager_error(const Engine& engine, bool v2_api);

}  // namespace kvsim::properties::engine_rules
