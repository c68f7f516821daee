// The state of one initialized LLMDataDist (one simulated host process bound to one device):
// options, caches, pools, links, the process-wide transfer mutex and diagnostics. Shared by the
// facade, both cache managers and the background jobs, which keep it alive past finalize.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "impl/cache_registry.h"
#include "impl/diagnostics.h"
#include "impl/link.h"
#include "impl/memory_pool.h"
#include "impl/platform.h"
#include "impl/types.h"
#include "impl/validation.h"

namespace kvsim::impl {

class Directory;
struct CommDomain;

/// kvsim option: "1" turns every diagnostic into an error (default "0").
inline constexpr const char* kOptionKvsimStrict = "kvsim.Strict";

/// The API a program calls: the rules that differ between the library's front ends.
enum class FrontEnd {
  kPython,  ///< llm_datadist (Python): one LLMDataDist per process, its link_clusters checks.
  kCpp,     ///< llm_datadist.h: always v2, any number of instances, LinkMsgHandler's checks.
};

/// The engine generation and kvsim's own settings, beside the library's options.
struct KvsimSettings {
  ApiVersion version = ApiVersion::kV1;
  bool strict = false;
  FrontEnd front_end = FrontEnd::kPython;
};

/// The generation as the library picks it (§1; hixl v2/llm_datadist.py _setup_engine_option):
/// v2 (CacheManager) when llm.EnableCacheManager is "1" after llm.LocalCommRes turned it on,
/// else v1 (KvCacheManager). Reads kvsim.Strict; any other "kvsim." key is rejected
/// (LLMException(LLM_PARAM_INVALID) naming it), so no kvsim option can contradict the library's.
KvsimSettings parse_kvsim_settings(const std::map<std::string, std::string>& options,
                                   const EngineOptions& engine);

/// One process's llm_datadist state.
class DataDistCore {
 public:
  /// `options.device_id` is the world device (init resolved the process's logical id).
  DataDistCore(Platform& platform, Directory& directory, int process, std::uint64_t cluster_id,
               LLMRole role, EngineOptions options, KvsimSettings settings);
  DataDistCore(const DataDistCore&) = delete;
  DataDistCore& operator=(const DataDistCore&) = delete;

  Platform& platform() const { return platform_; }
  Directory& directory() const { return directory_; }
  /// The simulated host process this instance belongs to (Platform::current_process at init).
  int process() const { return process_; }
  std::uint64_t cluster_id() const { return cluster_id_; }
  LLMRole role() const { return role_; }
  void set_role(LLMRole role) { role_ = role; }
  const EngineOptions& options() const { return options_; }
  void set_listen_ip_info(std::optional<IpInfo> info) { options_.listen_ip_info = info; }
  ApiVersion version() const { return settings_.version; }
  FrontEnd front_end() const { return settings_.front_end; }
  bool strict() const { return settings_.strict; }
  /// The world device it is bound to.
  int device() const { return options_.device_id; }
  /// The node (server) of its device.
  int node() const { return platform_.node_of(options_.device_id); }
  /// llm.TransferBackend="hixl": one-sided links, both directions at once (§5).
  bool hixl() const { return options_.transfer_backend == kTransferBackendHixl; }
  /// False after finalize: per-layer calls of jobs still running return LLM_FAILED (§3.4).
  bool initialized() const { return initialized_; }
  void set_finalized() { initialized_ = false; }
  /// llm.SyncKvCacheWaitTime as simulated time (§5).
  Time sync_timeout() const;
  /// LLM_TIMEOUT (v2) or LLM_WAIT_PROCESS_TIMEOUT (v1) (§1).
  LLMStatusCode wait_timeout_code() const;

  CacheRegistry& caches() { return caches_; }
  const CacheRegistry& caches() const { return caches_; }
  /// The process-wide transfer mutex of §3.4.
  Mutex& transfer_mutex() { return *transfer_mutex_; }

  std::map<std::uint64_t, std::shared_ptr<Link>>& links() { return links_; }
  /// The live link to `cluster_id`, or nullptr.
  std::shared_ptr<Link> find_link(std::uint64_t cluster_id) const;
  bool any_link() const { return !links_.empty(); }
  /// True once link (the comm-domain API) has succeeded: registrations then default to
  /// remote_accessible=False and refuse True (§4; hixl v2/cache_manager.py's sticky
  /// set_is_call_linked, which link_clusters never sets).
  bool registers_as_linked() const { return called_link_; }
  void set_called_link() { called_link_ = true; }

  /// This process's comm domains by comm id (§4 link).
  std::map<std::uint64_t, std::shared_ptr<CommDomain>>& comm_domains() { return comm_domains_; }
  const std::map<std::uint64_t, std::shared_ptr<CommDomain>>& comm_domains() const {
    return comm_domains_;
  }
  /// A fresh comm id: 1, 2, ... per process, as the real library numbers them.
  std::uint64_t next_comm_id() { return ++last_comm_id_; }

  /// The pool of a placement (llm.MemPoolConfig / llm.HostMemPoolConfig), or nullptr.
  MemoryPool* pool(Placement placement);
  /// Installs a pool over a platform allocation at `base`.
  void set_pool(Placement placement, std::uint64_t base, const MemPoolConfig& config);

  /// transfer_cache_async tasks started and not finished.
  int tasks_in_flight = 0;
  /// v1: a link_clusters or unlink_clusters holds the process's link-operation lock.
  bool link_op_busy = false;
  /// v1: set when the current holder of the link-operation lock lets it go.
  std::shared_ptr<Signal> link_op_done{};
  /// A fresh task id (§3.2: a per-call counter).
  std::uint64_t next_task_id() { return ++last_task_id_; }

  /// Records a diagnostic in the world's sink and returns it.
  Diagnostic record(DiagnosticKind kind, std::string message,
                    std::optional<std::uint64_t> peer = std::nullopt,
                    std::optional<std::uint64_t> task_id = std::nullopt);
  /// Records a diagnostic detected synchronously in a call and returns it; strict mode throws
  /// DiagnosticError naming `argument` instead of returning.
  Diagnostic flag(DiagnosticKind kind, std::string message, const std::string& argument,
                  std::optional<std::uint64_t> peer = std::nullopt,
                  std::optional<std::uint64_t> task_id = std::nullopt);

 private:
  Platform& platform_;
  Directory& directory_;
  int process_;
  std::uint64_t cluster_id_;
  LLMRole role_;
  EngineOptions options_;
  KvsimSettings settings_;
  bool initialized_ = true;
  CacheRegistry caches_;
  std::unique_ptr<Mutex> transfer_mutex_;
  std::map<std::uint64_t, std::shared_ptr<Link>> links_;
  bool called_link_ = false;
  std::map<std::uint64_t, std::shared_ptr<CommDomain>> comm_domains_;
  std::uint64_t last_comm_id_ = 0;
  std::optional<MemoryPool> device_pool_;
  std::optional<MemoryPool> host_pool_;
  std::uint64_t last_task_id_ = 0;
};

}  // namespace kvsim::impl
