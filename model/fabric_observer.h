// What a Fabric reports as it runs, for traces and statistics (every time in ps).
#pragma once

#include <cstdint>
#include <vector>

#include "model/fluid_network.h"
#include "model/units.h"

namespace kvsim::model {

struct EngineRef;
struct BatchOutcome;
struct LinkEvent;

/// Receives the Fabric's activity. Every hook defaults to nothing; hooks run in simulation
/// context and must not post or block.
class FabricObserver {
 public:
  virtual ~FabricObserver() = default;
  /// An engine processed `descriptors` descriptors of `batch` during [start, end).
  virtual void on_processing(const EngineRef& engine, std::uint64_t batch, SimTime start,
                             SimTime end, std::size_t descriptors) {
    (void)engine, (void)batch, (void)start, (void)end, (void)descriptors;
  }
  /// `bytes` of `batch` were on the wire over `links` during [start, end); `completed` is false
  /// when a fault cut them off (then not all of them arrived).
  virtual void on_data(const EngineRef& engine, std::uint64_t batch, SimTime start, SimTime end,
                       std::uint64_t bytes, const std::vector<std::uint32_t>& links,
                       bool completed) {
    (void)engine, (void)batch, (void)start, (void)end, (void)bytes, (void)links, (void)completed;
  }
  /// A fluid flow of `bytes` started now over `path` (its resources and weights), carrying part
  /// of a chunk of `batch`. For cross-validation of the flow timing against other solvers.
  virtual void on_flow_start(FluidNetwork::FlowId flow, std::uint64_t batch, SimTime at,
                             double bytes, const std::vector<FluidNetwork::Use>& path) {
    (void)flow, (void)batch, (void)at, (void)bytes, (void)path;
  }
  /// A flow sent its last byte (`completed`), or a fault cancelled it.
  virtual void on_flow_end(FluidNetwork::FlowId flow, SimTime at, bool completed) {
    (void)flow, (void)at, (void)completed;
  }
  /// A batch ended (its completion callback runs right after).
  virtual void on_batch_end(const EngineRef& engine, const BatchOutcome& outcome) {
    (void)engine, (void)outcome;
  }
  /// A link went down, came back or changed speed.
  virtual void on_link_event(std::uint32_t link, SimTime at, const LinkEvent& event) {
    (void)link, (void)at, (void)event;
  }
};

}  // namespace kvsim::model
