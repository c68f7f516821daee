// A flow set: resources with capacities, flows with start times, paths, weights and caps, and
// capacity changes. The common input of kvsim's fluid network, SimGrid and the exact reference
// in the cross-validation tier, and what a recorded Fabric run is turned into.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "model/units.h"

namespace kvsim::crossval {

/// A shared resource (link direction, HBM port, DMA engine) of `capacity` bytes/s.
struct Resource {
  std::string name;
  double capacity = 0;
};

/// One resource a flow crosses and how many times its bytes count there.
struct Hop {
  std::uint32_t resource = 0;
  double weight = 1.0;
};

/// A flow of `bytes` that starts at `start` over `path`, optionally rate-capped.
struct Flow {
  std::uint64_t id = 0;
  double bytes = 0;
  model::SimTime start = 0;
  std::vector<Hop> path;
  double cap = std::numeric_limits<double>::infinity();
  /// The finish time kvsim's Fabric gave it, when the set was recorded from a Fabric run.
  std::optional<model::SimTime> fabric_finish;
};

/// A capacity that changes at a time (a link degrading or recovering).
struct CapacityChange {
  model::SimTime at = 0;
  std::uint32_t resource = 0;
  double capacity = 0;
};

struct FlowSet {
  std::string name;
  std::string description;
  std::vector<Resource> resources;
  std::vector<Flow> flows;
  std::vector<CapacityChange> changes;

  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;
};

/// Reads a flow set from JSON (the format in crossval/README.md); throws std::invalid_argument.
FlowSet read_flow_set(const std::string& path);
/// Writes it as JSON (finish times of a recorded Fabric run included).
void write_flow_set(const FlowSet& set, const std::string& path);

/// Each flow's finish time, by flow id.
struct Finish {
  std::uint64_t id = 0;
  model::SimTime at = 0;
};

/// Runs the set through kvsim's FluidNetwork alone, in simulated picoseconds.
std::vector<Finish> run_fluid(const FlowSet& set);

}  // namespace kvsim::crossval
