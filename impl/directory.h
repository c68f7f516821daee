// The world's registry of initialized LLMDataDist instances (one per simulated host process), by
// cluster id and by listen address, so that link_clusters finds its server and pulls read the
// peer's cache table; the comm domains being set up; plus the world's diagnostic sink. One
// Directory per simulated world.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "impl/diagnostics.h"
#include "impl/types.h"

namespace kvsim::impl {

class DataDistCore;
struct CommDomain;

/// Who is in the world.
class Directory {
 public:
  Directory() = default;
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;

  /// Adds an initialized instance. LLMException(LLM_PARAM_INVALID, "cluster_id") if another
  /// instance already uses its cluster id (kvsim rule: links are found by cluster id).
  void add(const std::shared_ptr<DataDistCore>& core);
  /// Removes the instance (finalize).
  void remove(const DataDistCore& core);
  /// The instance with this cluster id, or nullptr.
  std::shared_ptr<DataDistCore> find_cluster(std::uint64_t cluster_id) const;
  /// Every initialized instance, by cluster id.
  const std::map<std::uint64_t, std::shared_ptr<DataDistCore>>& members() const {
    return by_cluster_;
  }
  /// An initialized instance of host process `process`, or nullptr.
  std::shared_ptr<DataDistCore> find_process(int process) const;
  /// Every diagnostic recorded in this world, in order of detection.
  const DiagnosticLog& diagnostics() const { return diagnostics_; }
  DiagnosticLog& diagnostics() { return diagnostics_; }
  /// Comm domains being set up, by comm_name: where link's members meet (§4).
  std::map<std::string, std::shared_ptr<CommDomain>>& forming_comm_domains() {
    return forming_comm_domains_;
  }

 private:
  std::map<std::uint64_t, std::shared_ptr<DataDistCore>> by_cluster_;
  DiagnosticLog diagnostics_;
  std::map<std::string, std::shared_ptr<CommDomain>> forming_comm_domains_;
};

}  // namespace kvsim::impl
