// Diagnostics: behaviour the real llm_datadist hides or leaves undefined, recorded so that users
// can see it (per task and per world), and turned into errors by strict mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "impl/errors.h"
#include "impl/platform.h"

namespace kvsim::impl {

/// What a diagnostic reports. Each names the spec rule it comes from.
enum class DiagnosticKind {
  kSynchronizerException,  ///< §3.2 [I]: synchronize_layer (or the job) raised; results stay None.
  kResultAliased,          ///< §3.3 [I]: configs share a dst_cluster_id, hence a result slot.
  kSrcLayerRangeMutated,   ///< §3.1 item 6: a None src_layer_range was set in the caller's object.
  kKeyConfigLayerIndex,    ///< §3.2 [I]: TransferWithCacheKeyConfig indexed by absolute layer.
  kLinkCallOverlap,        ///< §3.5 v1: transfer_cache_async and pull_* on one link at once.
  kConcurrentTransfer,     ///< §3.5: transfer_cache_async while another task is in flight.
  kDstOutsidePeer,         ///< §3.5 v2: dst addresses not in the peer's memory ("error unknown").
  kUnalignedRegistration,  ///< §4: a DEVICE address not 2 MiB aligned (needed for HCCS D2D).
  kFinalizeWhileBusy,      ///< §4: finalize while transfer tasks are in flight.
  /// §4 "one per process": a second LLMDataDist initialized by a script that kvsim did not
  /// launch; the library raises "Cannot init multiple LLMDataDists".
  kSeveralDataDistsInProcess,
  /// §5 llm.listenIpInfo: listening on a device NIC address; the library binds a host TCP socket,
  /// which fails on hardware (the NIC belongs to the NPU).
  kListenOnDeviceAddress,
  /// §4 unregister_cache: called while links remain; the docs require unlinking first (HCCL
  /// reports an error on hardware), the code does not check.
  kUnregisterWhileLinked,
  /// §4 unregister_cache: no such registered cache; the library logs a warning and succeeds.
  kUnregisterUnknownCache,
  /// §4 push_*: the default layer range is empty (num_tensors < tensor_num_per_layer), so the
  /// library sends nothing and reports success.
  kPushSendsNothing,
};

/// "SynchronizerException", "ResultAliased", ...
std::string_view to_string(DiagnosticKind kind);

/// The status a strict-mode error carries for each kind: LLM_LINK_BUSY for the concurrency rules
/// (§6 cites it for transfer_cache_async with pull_* on one link), LLM_FAILED for a raising
/// synchronizer, a dst outside the peer, finalize while busy, a second LLMDataDist in a process,
/// a listen address the host cannot bind and unregistering while linked,
/// LLM_KV_CACHE_NOT_EXIST for an unknown cache, LLM_PARAM_INVALID otherwise.
LLMStatusCode strict_status(DiagnosticKind kind);

/// One recorded diagnostic.
struct Diagnostic {
  DiagnosticKind kind = DiagnosticKind::kSynchronizerException;
  std::string message;
  Time time = 0;                                   ///< Simulated time of detection.
  std::uint64_t cluster_id = 0;                    ///< The LLMDataDist that detected it.
  std::optional<std::uint64_t> peer_cluster_id{};  ///< The link concerned, if any.
  std::optional<std::uint64_t> task_id{};          ///< The CacheTask concerned, if any.
};

/// The error strict mode raises where a diagnostic is detected (an LLMException, so code that
/// handles the library's errors handles it too).
class DiagnosticError : public LLMException {
 public:
  DiagnosticError(Diagnostic diagnostic, std::string argument);
  /// The diagnostic that strict mode turned into this error.
  const Diagnostic& diagnostic() const noexcept { return diagnostic_; }

 private:
  Diagnostic diagnostic_;
};

/// An append-only list of diagnostics (a world's sink or a task's list).
class DiagnosticLog {
 public:
  void add(const Diagnostic& diagnostic) { entries_.push_back(diagnostic); }
  const std::vector<Diagnostic>& entries() const { return entries_; }
  /// Number of entries of one kind.
  std::size_t count(DiagnosticKind kind) const;

 private:
  std::vector<Diagnostic> entries_;
};

}  // namespace kvsim::impl
