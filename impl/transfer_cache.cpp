#include "impl/transfer_cache.h"

#include <set>
#include <string>

#include "impl/remote_caches.h"
#include "impl/transfer_job.h"

namespace kvsim::impl {

namespace {

std::string config_path(std::size_t i) {
  return "transfer_configs[" + std::to_string(i) + "]";
}

}  // namespace

CacheTask start_transfer_cache(const std::shared_ptr<DataDistCore>& core,
                               const CacheView& src_cache,
                               std::shared_ptr<LayerSynchronizer> layer_synchronizer,
                               std::vector<AnyTransferConfig>& transfer_configs,
                               const TransferBlockArgs& blocks) {
  DataDistCore& c = *core;
  std::vector<bool> had_none;
  for (const AnyTransferConfig& config : transfer_configs) {
    had_none.push_back(!src_layer_range_of(config).has_value());
  }
  TransferCacheEnv env;
  env.version = c.version();
  env.role = c.role();
  env.remote_cache_accessible = c.options().enable_remote_cache_accessible;
  // Strict mode validates a copy, so that a strict-mode error leaves the caller's configs as they
  // were; faithful mode validates in place, as the library does.
  std::vector<AnyTransferConfig> strict_copy;
  std::vector<AnyTransferConfig>* target = &transfer_configs;
  if (c.strict()) {
    strict_copy = transfer_configs;
    target = &strict_copy;
  }
  TransferCacheArgs args;
  args.src_cache = &src_cache;
  args.has_layer_synchronizer = layer_synchronizer != nullptr;
  args.transfer_configs = target;
  args.src_block_indices = blocks.src_block_indices;
  args.dst_block_indices = blocks.dst_block_indices;
  args.dst_block_memory_size = blocks.dst_block_memory_size;
  const TransferCachePlan plan = validate_transfer_cache_async(args, env);
  const std::vector<AnyTransferConfig>& configs = *target;
  const std::uint64_t task_id = c.next_task_id();
  std::vector<Diagnostic> found;

  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (had_none[i]) {
      found.push_back(
          c.flag(DiagnosticKind::kSrcLayerRangeMutated,
                 config_path(i) + ".src_layer_range was None and is now " +
                     to_string(*src_layer_range_of(configs[i])) + " in the caller's object",
                 config_path(i) + ".src_layer_range", dst_cluster_id_of(configs[i]), task_id));
    }
  }
  std::set<std::uint64_t> seen;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::uint64_t cluster = dst_cluster_id_of(configs[i]);
    if (!seen.insert(cluster).second) {
      found.push_back(c.flag(DiagnosticKind::kResultAliased,
                             config_path(i) + " shares dst_cluster_id " + std::to_string(cluster) +
                                 " with an earlier config: their results share one slot",
                             config_path(i) + ".dst_cluster_id", cluster, task_id));
    }
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto* keyed = std::get_if<TransferWithCacheKeyConfig>(&configs[i]);
    if (keyed != nullptr && keyed->src_layer_range()->start != 0) {
      found.push_back(c.flag(
          DiagnosticKind::kKeyConfigLayerIndex,
          config_path(i) + ".src_layer_range starts at " +
              std::to_string(keyed->src_layer_range()->start) +
              ": dst_layer_range is indexed by the absolute layer, giving a wrong layer or an "
              "IndexError in the job",
          config_path(i) + ".src_layer_range", keyed->dst_cluster_id(), task_id));
    }
  }
  if (c.tasks_in_flight > 0) {
    found.push_back(
        c.flag(DiagnosticKind::kConcurrentTransfer,
               std::to_string(c.tasks_in_flight) +
                   (c.version() == ApiVersion::kV1
                        ? " transfer_cache_async task(s) in flight; v1 forbids concurrent calls"
                        : " transfer_cache_async task(s) in flight; their layers interleave on the "
                          "process-wide transfer mutex"),
               "transfer_cache_async", std::nullopt, task_id));
  }
  std::vector<std::shared_ptr<Link>> v1_links;
  if (c.version() == ApiVersion::kV1) {
    for (const std::uint64_t cluster : seen) {
      const std::shared_ptr<Link> link = c.find_link(cluster);
      if (!link) continue;
      const std::shared_ptr<Link> other = peer_end(c, *link);
      if (link->active_pulls > 0 || (other && other->active_pulls > 0)) {
        found.push_back(c.flag(DiagnosticKind::kLinkCallOverlap,
                               "transfer_cache_async to cluster " + std::to_string(cluster) +
                                   " while a pull is in progress on that link (v1 forbids it)",
                               "transfer_configs", cluster, task_id));
      }
      v1_links.push_back(link);
    }
  }

  auto task = std::make_shared<TaskState>();
  task->id = task_id;
  for (const AnyTransferConfig& config : configs) {
    task->config_clusters.push_back(dst_cluster_id_of(config));
  }
  task->wait_timeout_code = plan.wait_timeout_code;
  task->done = c.platform().make_signal();
  // The call-time diagnostics also belong to the task.
  for (const Diagnostic& d : found) task->diagnostics.add(d);

  for (const std::shared_ptr<Link>& link : v1_links) ++link->active_v1_transfers;
  ++c.tasks_in_flight;
  TransferJobSpec spec;
  spec.core = core;
  spec.src_cache_id = src_cache.cache_id;
  spec.synchronizer = std::move(layer_synchronizer);
  spec.configs = configs;
  spec.plan = plan;
  spec.task = task;
  spec.v1_links = std::move(v1_links);
  start_transfer_job(std::move(spec));
  return CacheTask(task);
}

}  // namespace kvsim::impl
