// Runs a list of copy descriptors on a device's DMA engines (spec §3.4 "Execution"): batches of at
// most 1024 descriptors, one after another as on one stream, waited with a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "impl/copy_geometry.h"
#include "impl/platform.h"
#include "impl/status.h"

namespace kvsim::impl {

/// Most descriptors per posted batch (§3.4).
inline constexpr std::size_t kMaxBatchDescriptors = 1024;

/// The status a failed batch (a link that went down) gives. §6 reserves LLM_LINK_FAILED for
/// link setup; a failed one-sided put surfaces as the runtime's suspected-remote fault,
/// ACL 507057, which Python keeps as LLM_SUSPECT_REMOTE_ERROR ([I]).
inline constexpr LLMStatusCode kCopyFailedStatus = LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR;

/// How a run ended.
struct CopyRun {
  LLMStatusCode status = LLMStatusCode::LLM_SUCCESS;
  std::string error;               ///< empty on success
  std::uint64_t landed_bytes = 0;  ///< bytes of the completed batches plus the failed one's
  std::size_t batches = 0;         ///< batches posted
};

/// Cuts a descriptor list into batches, one at a time (see split_batches).
class BatchSplitter {
 public:
  /// The end of the batch that starts at descs[first] (first < descs.size()).
  std::size_t next(const std::vector<CopyDescriptor>& descs, std::size_t first);

 private:
  std::vector<std::pair<std::uint64_t, std::uint64_t>> scratch_;
  std::map<std::uint64_t, std::uint64_t> dst_ranges_;
  bool try_sorted_ = true;
};

/// Splits descriptors, in order, into batches of at most kMaxBatchDescriptors whose destination
/// ranges are pairwise disjoint (the platform requires it; a repeated destination starts a new
/// batch, so later writes still land after earlier ones).
std::vector<std::vector<CopyDescriptor>> split_batches(const std::vector<CopyDescriptor>& descs);

/// Posts the batches on `device` one after another and waits for each. A failed batch gives
/// kCopyFailedStatus, passing `deadline` gives `timeout_status` (the posted batch is not
/// cancelled: the platform cannot abort it). Empty input succeeds at once.
CopyRun run_copies(Platform& platform, int device, const std::vector<CopyDescriptor>& descs,
                   Time deadline, LLMStatusCode timeout_status);

/// A descriptor list made on demand: `size` descriptors, the i-th is at(i). A long pull then
/// never exists whole, only one batch of it at a time.
struct DescriptorList {
  std::size_t size = 0;
  std::function<CopyDescriptor(std::size_t)> at;
};

/// run_copies for a list whose destinations the caller knows to be pairwise disjoint: batches
/// are full (kMaxBatchDescriptors) and need no overlap check.
CopyRun run_disjoint_copies(Platform& platform, int device, const DescriptorList& descs,
                            Time deadline, LLMStatusCode timeout_status);

}  // namespace kvsim::impl
