#include "impl/diagnostics.h"

#include <algorithm>

namespace kvsim::impl {

std::string_view to_string(DiagnosticKind kind) {
  switch (kind) {
    case DiagnosticKind::kSynchronizerException:
      return "SynchronizerException";
    case DiagnosticKind::kResultAliased:
      return "ResultAliased";
    case DiagnosticKind::kSrcLayerRangeMutated:
      return "SrcLayerRangeMutated";
    case DiagnosticKind::kKeyConfigLayerIndex:
      return "KeyConfigLayerIndex";
    case DiagnosticKind::kLinkCallOverlap:
      return "LinkCallOverlap";
    case DiagnosticKind::kConcurrentTransfer:
      return "ConcurrentTransfer";
    case DiagnosticKind::kDstOutsidePeer:
      return "DstOutsidePeer";
    case DiagnosticKind::kUnalignedRegistration:
      return "UnalignedRegistration";
    case DiagnosticKind::kFinalizeWhileBusy:
      return "FinalizeWhileBusy";
    case DiagnosticKind::kSeveralDataDistsInProcess:
      return "SeveralDataDistsInProcess";
    case DiagnosticKind::kListenOnDeviceAddress:
      return "ListenOnDeviceAddress";
    case DiagnosticKind::kUnregisterWhileLinked:
      return "UnregisterWhileLinked";
    case DiagnosticKind::kUnregisterUnknownCache:
      return "UnregisterUnknownCache";
    case DiagnosticKind::kPushSendsNothing:
      return "PushSendsNothing";
  }
  return "?";
}

LLMStatusCode strict_status(DiagnosticKind kind) {
  switch (kind) {
    case DiagnosticKind::kLinkCallOverlap:
    case DiagnosticKind::kConcurrentTransfer:
      return LLMStatusCode::LLM_LINK_BUSY;
    case DiagnosticKind::kSynchronizerException:
    case DiagnosticKind::kDstOutsidePeer:
    case DiagnosticKind::kFinalizeWhileBusy:
    case DiagnosticKind::kSeveralDataDistsInProcess:
    case DiagnosticKind::kListenOnDeviceAddress:
    case DiagnosticKind::kUnregisterWhileLinked:
      return LLMStatusCode::LLM_FAILED;
    case DiagnosticKind::kUnregisterUnknownCache:
      return LLMStatusCode::LLM_KV_CACHE_NOT_EXIST;
    default:
      return LLMStatusCode::LLM_PARAM_INVALID;
  }
}

DiagnosticError::DiagnosticError(Diagnostic diagnostic, std::string argument)
    : LLMException(
          strict_status(diagnostic.kind), std::move(argument),
          "strict mode: " + std::string(to_string(diagnostic.kind)) + ": " + diagnostic.message),
      diagnostic_(std::move(diagnostic)) {}

std::size_t DiagnosticLog::count(DiagnosticKind kind) const {
  return static_cast<std::size_t>(std::count_if(
      entries_.begin(), entries_.end(), [kind](const Diagnostic& d) { return d.kind == kind; }));
}

}  // namespace kvsim::impl
