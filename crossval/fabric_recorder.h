// Records the flows a Fabric runs (start, bytes, path, capacity changes) and the finish time it
// gave each, as a FlowSet that other solvers can replay.
#pragma once

#include <map>
#include <vector>

#include "crossval/flow_set.h"
#include "model/fabric.h"
#include "model/fabric_observer.h"

namespace kvsim::crossval {

/// Attach before the run (as the Fabric's observer); call flow_set() after it.
class FabricRecorder final : public model::FabricObserver {
 public:
  /// Snapshots every resource's name and capacity now (the replay's initial capacities).
  explicit FabricRecorder(const model::Fabric& fabric);

  void on_flow_start(model::FluidNetwork::FlowId flow, std::uint64_t batch, model::SimTime at,
                     double bytes, const std::vector<model::FluidNetwork::Use>& path) override;
  void on_flow_end(model::FluidNetwork::FlowId flow, model::SimTime at, bool completed) override;
  void on_link_event(std::uint32_t link, model::SimTime at, const model::LinkEvent& event) override;

  /// The recorded flows (callable after the fabric is gone), keeping only the resources they use,
  /// numbered in start order. Throws std::logic_error if a fault cancelled a flow (a replay cannot
  /// cancel at the same point).
  FlowSet flow_set(const std::string& name, const std::string& description) const;

 private:
  const model::Fabric& fabric_;
  std::vector<std::string> names_;  ///< the fabric may be gone when flow_set() is called
  std::vector<double> initial_;
  std::vector<Flow> flows_;  ///< resource ids still the Fabric's
  std::map<model::FluidNetwork::FlowId, std::size_t> index_;
  std::vector<CapacityChange> changes_;
  std::size_t cancelled_ = 0;
};

}  // namespace kvsim::crossval
