#include "impl/data_dist_core.h"

#include "impl/directory.h"

namespace kvsim::impl {

KvsimSettings parse_kvsim_settings(const std::map<std::string, std::string>& options,
                                   const EngineOptions& engine) {
  KvsimSettings s;
  s.version = engine.enable_cache_manager ? ApiVersion::kV2 : ApiVersion::kV1;
  for (const auto& [key, value] : options) {
    if (key.rfind("kvsim.", 0) != 0) continue;
    if (key != kOptionKvsimStrict) {
      throw_param_invalid(key,
                          "is not a kvsim option (kvsim.Strict is; the API generation "
                          "follows llm.EnableCacheManager as in the library)");
    }
    if (value != "0" && value != "1") {
      throw_param_invalid(key, "\"" + value + "\" is not \"0\" or \"1\"");
    }
    s.strict = value == "1";
  }
  return s;
}

DataDistCore::DataDistCore(Platform& platform, Directory& directory, int process,
                           std::uint64_t cluster_id, LLMRole role, EngineOptions options,
                           KvsimSettings settings)
    : platform_(platform),
      directory_(directory),
      process_(process),
      cluster_id_(cluster_id),
      role_(role),
      options_(std::move(options)),
      settings_(settings),
      transfer_mutex_(platform.make_mutex("transfer c" + std::to_string(cluster_id))) {}

Time DataDistCore::sync_timeout() const {
  return from_ms(static_cast<std::uint64_t>(options_.sync_kv_timeout_ms));
}

LLMStatusCode DataDistCore::wait_timeout_code() const {
  return settings_.version == ApiVersion::kV1 ? LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT
                                              : LLMStatusCode::LLM_TIMEOUT;
}

std::shared_ptr<Link> DataDistCore::find_link(std::uint64_t cluster_id) const {
  const auto it = links_.find(cluster_id);
  return it == links_.end() ? nullptr : it->second;
}

MemoryPool* DataDistCore::pool(Placement placement) {
  std::optional<MemoryPool>& p = placement == Placement::DEVICE ? device_pool_ : host_pool_;
  return p ? &*p : nullptr;
}

void DataDistCore::set_pool(Placement placement, std::uint64_t base, const MemPoolConfig& config) {
  std::optional<MemoryPool>& p = placement == Placement::DEVICE ? device_pool_ : host_pool_;
  p.emplace(base, config.memory_size, config.page_shift);
}

Diagnostic DataDistCore::record(DiagnosticKind kind, std::string message,
                                std::optional<std::uint64_t> peer,
                                std::optional<std::uint64_t> task_id) {
  Diagnostic d;
  d.kind = kind;
  d.message = std::move(message);
  d.time = platform_.now();
  d.cluster_id = cluster_id_;
  d.peer_cluster_id = peer;
  d.task_id = task_id;
  directory_.diagnostics().add(d);
  return d;
}

Diagnostic DataDistCore::flag(DiagnosticKind kind, std::string message, const std::string& argument,
                              std::optional<std::uint64_t> peer,
                              std::optional<std::uint64_t> task_id) {
  Diagnostic d = record(kind, std::move(message), peer, task_id);
  if (settings_.strict) throw DiagnosticError(std::move(d), argument);
  return d;
}

}  // namespace kvsim::impl
