// Seeded fault plans for scenario and serving runs (`kvsim run FILE --faults SEEDS`): what a seed
// may draw (a scenario's fault_plan: section), the draw, and the link events it makes. Knows the
// topology's NICs and simulated time; runs nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/fabric.h"
#include "model/topology.h"

namespace kvsim::sim {

/// A link event at a simulated time (a scenario's faults: list, or a drawn fault's).
struct FaultSpec {
  std::string link;
  model::SimTime at = 0;
  model::LinkEvent event;
};

/// A device whose HBM allocations fail from `from` to `until` (a drawn device_oom).
struct MemoryFaultSpec {
  int device = 0;
  model::SimTime from = 0;
  model::SimTime until = 0;
};

/// A device whose copy completions reach their callers `delay` late from `from` to `until` (a
/// drawn completion_delay).
struct CompletionDelaySpec {
  int device = 0;
  model::SimTime from = 0;
  model::SimTime until = 0;
  model::SimTime delay = 0;
};

/// A device whose copy engines take nothing new from their queues from `from` to `until` (a
/// drawn queue_stall).
struct QueueStallSpec {
  int device = 0;
  model::SimTime from = 0;
  model::SimTime until = 0;
};

/// A serving instance killed at `at` (every rank's process, as SIGKILL would) and started again
/// at `restart` (a drawn process_killed).
struct ProcessFaultSpec {
  std::string instance;  ///< "prefill0", "decode1"
  model::SimTime at = 0;
  model::SimTime restart = 0;
};

/// What a seed may draw (scenario key fault_plan; every field has a default). The same kinds as
/// `kvsim launch --faults` (python/kvsim/launch/faults.py), plus a NIC that never comes back.
struct FaultPlan {
  enum class Kind {
    kLinkDown,         ///< down for a drawn duration, then up
    kLinkDegraded,     ///< at `factor` of its bandwidth for a drawn duration
    kNicLost,          ///< down from a drawn time to the end of the run
    kDeviceOom,        ///< a node's (or one device's) HBM full for a drawn duration
    kProcessKilled,    ///< a serving instance killed, restarted after a drawn duration
    kCompletionDelay,  ///< a node's (or one device's) copy completions `delay` late for a while
    kQueueStall,       ///< a node's (or one device's) transfer queues stop draining for a while
  };
  std::vector<Kind> kinds{Kind::kLinkDown, Kind::kLinkDegraded};
  model::SimTime window_first = 0;  ///< a fault starts in [first, last]
  model::SimTime window_last = model::kMs * 1000;
  model::SimTime duration_first = model::kMs;  ///< and lasts [first, last]
  model::SimTime duration_last = 50 * model::kMs;
  int count = 1;                           ///< faults per seed
  double factor = 0.1;                     ///< kLinkDegraded: the share of bandwidth left
  model::SimTime delay = 2 * model::kSec;  ///< kCompletionDelay: how late [I]
  bool per_nic = false;  ///< scope "nic": one NIC; "node" (default): every NIC of a node
  /// kProcessKilled: the instances that may die ("prefill0", ...); empty: any of them.
  std::vector<std::string> processes;
};

/// "link_down", "link_degraded", "nic_lost", "device_oom", "process_killed", "completion_delay",
/// "queue_stall".
const char* to_string(FaultPlan::Kind kind);

/// What one fault may hit: a node's NICs (scope node) or one NIC (scope nic), and where the run's
/// nodes share a scale-up plane (CloudMatrix384's UB), the node's ports into it too.
struct FaultTarget {
  std::string name;                ///< "node 1" or a link name ("roce n1d3", "ub n1d3")
  std::vector<std::string> links;  ///< the topology's links it takes down or degrades
  std::string ports = "NICs";      ///< scope node: what its links are, for describe()
  std::vector<int> devices = {};   ///< a device_oom target's devices (device_targets)
};

/// One drawn fault.
struct DrawnFault {
  FaultPlan::Kind kind = FaultPlan::Kind::kLinkDown;
  std::string target;
  std::string ports = "NICs";  ///< what a node target's links are ("NICs and UB ports")
  std::vector<std::string> links;
  std::vector<int> devices;  ///< kDeviceOom: whose HBM; kCompletionDelay, kQueueStall: engines
  model::SimTime at = 0;
  model::SimTime until = 0;  ///< kNicLost: never back (0); kProcessKilled: its restart
  double factor = 1;
  model::SimTime delay = 0;  ///< kCompletionDelay
  /// "node 1's NICs down from t=0.041203 s to t=0.062001 s".
  std::string describe() const;
};

/// The targets on `nodes` (each a node of `topo` with NICs), in node order. Where two of `nodes`
/// share a scale-up domain whose switch carries the traffic between nodes, a node's targets
/// include its devices' scale-up ports: a fault only on the NICs would miss every transfer.
std::vector<FaultTarget> fault_targets(const model::Topology& topo, const std::vector<int>& nodes,
                                       bool per_nic);

/// What a device_oom may hit on `nodes`: each node's devices ("node 1"), or with `per_device` each
/// device ("device n1d3").
std::vector<FaultTarget> device_targets(const model::Topology& topo, const std::vector<int>& nodes,
                                        bool per_device);

/// The faults of one seed, in time order: the same plan, seed and targets give the same faults on
/// every machine (a 64-bit Mersenne Twister, integer draws). Faults on one target never overlap:
/// one that would starts when the earlier one ends. device_oom, completion_delay and queue_stall
/// draw from `devices`,
/// process_killed from `processes` (serving instances, FaultTarget::name only), the other kinds
/// from `targets` (a plan without those kinds draws as it did before they existed). Throws
/// std::invalid_argument when a kind has no target.
std::vector<DrawnFault> draw_faults(const FaultPlan& plan, std::uint64_t seed,
                                    const std::vector<FaultTarget>& targets,
                                    const std::vector<FaultTarget>& devices = {},
                                    const std::vector<FaultTarget>& processes = {});

/// The link events that make `faults` happen.
std::vector<FaultSpec> link_events(const std::vector<DrawnFault>& faults);
/// The memory faults that make `faults`' device_oom happen.
std::vector<MemoryFaultSpec> memory_faults(const std::vector<DrawnFault>& faults);
/// The stalls that make `faults`' queue_stall happen.
std::vector<QueueStallSpec> queue_stalls(const std::vector<DrawnFault>& faults);
/// The delays that make `faults`' completion_delay happen.
std::vector<CompletionDelaySpec> completion_delays(const std::vector<DrawnFault>& faults);
/// The instance kills that make `faults`' process_killed happen.
std::vector<ProcessFaultSpec> process_faults(const std::vector<DrawnFault>& faults);

/// "7", "1-20" or "1,4,9-12" as seeds, at most 10,000; std::invalid_argument naming --faults and
/// the rule otherwise.
std::vector<std::uint64_t> parse_seeds(const std::string& text);

}  // namespace kvsim::sim
