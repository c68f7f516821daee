// The background job of transfer_cache_async (spec §3.2), run on a Platform job.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "impl/cache_task.h"
#include "impl/data_dist_core.h"
#include "impl/layer_synchronizer.h"
#include "impl/link.h"
#include "impl/validation.h"

namespace kvsim::impl {

/// Everything the job needs, fixed at the call.
struct TransferJobSpec {
  std::shared_ptr<DataDistCore> core;
  std::int64_t src_cache_id = -1;
  std::shared_ptr<LayerSynchronizer> synchronizer;
  std::vector<AnyTransferConfig> configs;
  TransferCachePlan plan;
  std::shared_ptr<TaskState> task;
  /// Links whose active_v1_transfers count this job holds until it ends (§3.5 v1).
  std::vector<std::shared_ptr<Link>> v1_links;
};

/// Spawns the job. Per source layer L ascending: the configs covering L (list order); none: skip
/// L without calling synchronize_layer; synchronize_layer(L, None) false: LLM_PARAM_INVALID for
/// those configs and stop; then one transfer_layer per config, a failure recording its status
/// and stopping, the config's last layer recording SUCCESS. Configs never reached stay None.
/// An exception from synchronize_layer (or the IndexError of a TransferWithCacheKeyConfig whose
/// dst_layer_range is shorter than the absolute layer index, §3.2 [I]) ends the job leaving the
/// affected results None, so synchronize() says SUCCESS as in the real library, and records a
/// kSynchronizerException diagnostic; strict mode records LLM_FAILED for the configs of that
/// layer instead. The task's done Signal is set however the job ends.
void start_transfer_job(TransferJobSpec spec);

}  // namespace kvsim::impl
