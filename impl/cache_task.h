// CacheTask (spec §3.3): the handle transfer_cache_async returns, over the state its job fills.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "impl/diagnostics.h"
#include "impl/platform.h"
#include "impl/status.h"

namespace kvsim::impl {

/// What a transfer job and its CacheTask share.
struct TaskState {
  std::uint64_t id = 0;
  /// dst_cluster_id of each config, in config order.
  std::vector<std::uint64_t> config_clusters{};
  /// Results keyed by dst_cluster_id, so configs with the same id share a slot (§3.3 [I], kept);
  /// a missing key is Python's None.
  std::map<std::uint64_t, LLMStatusCode> results{};
  /// LLM_TIMEOUT (v2) or LLM_WAIT_PROCESS_TIMEOUT (v1) (§3.3).
  LLMStatusCode wait_timeout_code = LLMStatusCode::LLM_TIMEOUT;
  /// Set when the job ends, however it ends.
  std::unique_ptr<Signal> done{};
  DiagnosticLog diagnostics{};
};

/// The result of transfer_cache_async. Copyable; copies share the task.
class CacheTask {
 public:
  explicit CacheTask(std::shared_ptr<TaskState> state) : state_(std::move(state)) {}

  /// Waits up to `timeout_in_millis` (None: no limit; uint32, else ValueError). Still running:
  /// the wait-timeout code, the transfer going on (§3.3). Done: the first result in config order
  /// that is neither SUCCESS nor None, else LLM_SUCCESS.
  LLMStatusCode synchronize(std::optional<std::int64_t> timeout_in_millis = std::nullopt);
  /// Same wait. Still running: the wait-timeout code for every config. Done: each config's
  /// result by its dst_cluster_id, nullopt for None (§3.3).
  std::vector<std::optional<LLMStatusCode>> get_results(
      std::optional<std::int64_t> timeout_in_millis = std::nullopt);
  /// True once the job has ended.
  bool done() const { return state_->done->is_set(); }
  /// The task id (§3.2 task_id counter).
  std::uint64_t id() const { return state_->id; }
  /// Diagnostics recorded for this task.
  const std::vector<Diagnostic>& diagnostics() const { return state_->diagnostics.entries(); }

 private:
  bool wait(std::optional<std::int64_t> timeout_in_millis);

  std::shared_ptr<TaskState> state_;
};

}  // namespace kvsim::impl
