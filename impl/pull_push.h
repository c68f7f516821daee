// pull_cache, pull_blocks, push_cache, push_blocks (spec §4): synchronous transfers over a link.
// Pulls run on the local device (it reads the peer's memory) under the link's mutex (§3.4);
// pushes make one per-layer transfer_layer call per layer (§1, §4).
#pragma once

#include "impl/data_dist_core.h"
#include "impl/validation.h"

namespace kvsim::impl {

/// pull_cache. After validate_pull_cache: the local cache must exist (LLM_KV_CACHE_NOT_EXIST,
/// "cache"), the key's cluster be linked (LLM_NOT_YET_LINK), the remote cache exist
/// (LLM_KV_CACHE_NOT_EXIST, "cache_key") and be contiguous, the remote row and local
/// batch_index be in range, size (-1: the remote row) fit both rows, the tensor lists match in
/// length and range (all LLM_PARAM_INVALID), then validate_pull_placement. Copies time out after
/// llm.SyncKvCacheWaitTime (LLM_TIMEOUT; v1 LLM_WAIT_PROCESS_TIMEOUT) or fail with
/// kCopyFailedStatus, raised as LLMException. A CacheKey is consumed by a successful pull ([I]:
/// §4 "release is deferred until keys are pulled"). Remote-accessible mode reads the link's
/// cached remote table (§5); otherwise the peer's live caches. v1: a task in flight to that
/// cluster is a kLinkCallOverlap diagnostic (§3.5).
void pull_cache(DataDistCore& core, const PullCacheArgs& args);

/// pull_blocks: as pull_cache, into the blocks of a local PA cache. From a remote blocks cache
/// (BlocksCacheKey): runs of +1/+1 block pairs, equal block sizes required. From a contiguous
/// row (CacheKey / CacheKeyByIdAndIndex): the row cut into local blocks, at most
/// ceil(row / block) of them.
void pull_blocks(DataDistCore& core, const PullBlocksArgs& args);

/// push_cache: validate_push_cache, a DEVICE source (§4), then the remote-accessible geometry
/// checks of every layer against the remote cache table (a dst layer, row or block the remote
/// cache lacks: LLM_PARAM_INVALID before anything is sent, [I]), then transfer_layer per
/// (src, dst) layer pair toward the remote cache named by the key; the first failing layer
/// raises LLMException with its status (earlier layers have landed).
void push_cache(DataDistCore& core, const PushCacheArgs& args);

/// push_blocks: as push_cache, B2B toward the remote blocks cache of the BlocksCacheKey.
void push_blocks(DataDistCore& core, const PushBlocksArgs& args);

// Below the Python API's validation, for front ends with rules of their own (the C++ API):

/// pull_cache after validation: into local cache `local_id`, from the remote row `cache_key`.
void pull_cache_planned(DataDistCore& core, const PullCacheKey& cache_key, std::int64_t local_id,
                        const PullCachePlan& plan);
/// pull_blocks after validation: B2B (`b2b`: src_blocks name remote blocks) or C2B (a remote row
/// cut into the local blocks). A MIX remote cache serves either.
void pull_blocks_planned(DataDistCore& core, const PullBlocksKey& src_cache_key,
                         std::int64_t local_id, const PullBlocksPlan& plan, bool b2b);
/// push_* after validation: the up-front remote geometry checks, then one transfer_layer per
/// (src, dst) layer pair of `plan` toward the remote cache named by `key`; `api` names errors.
void push_planned(DataDistCore& core, const PushPlan& plan, const CacheView& src,
                  const TransferCacheKey& key, const char* api);

}  // namespace kvsim::impl
