// The per-layer C++ TransferCache (spec §3.4): one call per (layer, config) of
// transfer_cache_async, and per layer of push_cache / push_blocks (§1, §4).
#pragma once

#include <cstdint>
#include <optional>

#include "impl/copy_geometry.h"
#include "impl/data_dist_core.h"
#include "impl/diagnostics.h"
#include "impl/types.h"

namespace kvsim::impl {

/// A destination named by a remote cache key (remote-accessible mode, §3.4).
struct RemoteKeyTarget {
  TransferCacheKey key;
  std::uint64_t dst_layer_index = 0;
};

/// One per-layer call.
struct LayerCall {
  std::int64_t src_cache_id = -1;
  std::uint64_t dst_cluster_id = 0;
  /// What to send; dst_addrs is filled from `remote` when that is set.
  LayerTransfer transfer{};
  std::optional<RemoteKeyTarget> remote{};
};

/// Where diagnostics of a call also go (a task's list).
struct CallContext {
  DiagnosticLog* task_log = nullptr;
  std::optional<std::uint64_t> task_id{};
};

/// Runs one per-layer transfer and returns its status. Preconditions in the library's order
/// (§3.4): initialized (LLM_FAILED); tensor_num_per_layer > 0; the process-wide transfer mutex;
/// src cache registered (LLM_KV_CACHE_NOT_EXIST); link exists (LLM_NOT_YET_LINK); the link's
/// mutex for the whole layer; link registration OK (LLM_NOT_YET_LINK). Then the geometry checks
/// (LLM_PARAM_INVALID), the destination check, and the copies: posted on the local (source)
/// device as one-sided puts, waited up to llm.SyncKvCacheWaitTime counted from the start of
/// this call (LLM_TIMEOUT; v1 LLM_WAIT_PROCESS_TIMEOUT), a failed batch giving
/// kCopyFailedStatus. Destinations outside the peer's memory — not in a DEVICE allocation of the
/// peer's device, nor (HOST) in a peer cache from allocate_cache — give LLM_FAILED and a
/// kDstOutsidePeer diagnostic, nothing being sent (§3.5 "otherwise error unknown", [I]).
LLMStatusCode transfer_layer(DataDistCore& core, const LayerCall& call,
                             const CallContext& context = {});

}  // namespace kvsim::impl
