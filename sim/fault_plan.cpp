#include "sim/fault_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

namespace kvsim::sim {

namespace {

constexpr std::size_t kMaxSeeds = 10'000;

// A draw in [lo, hi] from 64-bit words (std::uniform_*_distribution differ between standard
// libraries; this does not).
model::SimTime draw_between(std::mt19937_64& rng, model::SimTime lo, model::SimTime hi) {
  if (hi <= lo) return lo;
  const std::uint64_t span = hi - lo;
  return lo + (span == ~std::uint64_t{0} ? rng() : rng() % (span + 1));
}

// Kinds drawn over device targets (a node's devices, or one device).
bool on_devices(FaultPlan::Kind k) {
  return k == FaultPlan::Kind::kDeviceOom || k == FaultPlan::Kind::kCompletionDelay ||
         k == FaultPlan::Kind::kQueueStall;
}

// What a fault's target is a target of: faults of one space on one target never overlap, and a
// node's memory, completions, queues and links are different spaces.
std::string space(FaultPlan::Kind k) {
  switch (k) {
    case FaultPlan::Kind::kDeviceOom:
      return "memory ";
    case FaultPlan::Kind::kCompletionDelay:
      return "completion ";
    case FaultPlan::Kind::kQueueStall:
      return "queue ";
    case FaultPlan::Kind::kProcessKilled:
      return "process ";
    default:
      return "";
  }
}

std::string seconds(model::SimTime t) {
  char text[48];
  std::snprintf(text, sizeof text, "t=%.6f s", model::to_seconds(t));
  return text;
}

}  // namespace

const char* to_string(FaultPlan::Kind kind) {
  switch (kind) {
    case FaultPlan::Kind::kLinkDown:
      return "link_down";
    case FaultPlan::Kind::kLinkDegraded:
      return "link_degraded";
    case FaultPlan::Kind::kNicLost:
      return "nic_lost";
    case FaultPlan::Kind::kDeviceOom:
      return "device_oom";
    case FaultPlan::Kind::kProcessKilled:
      return "process_killed";
    case FaultPlan::Kind::kCompletionDelay:
      return "completion_delay";
    case FaultPlan::Kind::kQueueStall:
      return "queue_stall";
  }
  return "?";
}

std::string DrawnFault::describe() const {
  if (kind == FaultPlan::Kind::kDeviceOom) {
    const std::string who = target.rfind("node ", 0) == 0 ? target + "'s devices" : target;
    return who + " out of memory from " + seconds(at) + " to " + seconds(until);
  }
  if (kind == FaultPlan::Kind::kCompletionDelay) {
    const std::string who = target.rfind("node ", 0) == 0 ? target + "'s devices'" : target + "'s";
    char late[32];
    std::snprintf(late, sizeof late, "%g", model::to_seconds(delay));
    return who + " copy completions " + late + " s late from " + seconds(at) + " to " +
           seconds(until);
  }
  if (kind == FaultPlan::Kind::kQueueStall) {
    const std::string who = target.rfind("node ", 0) == 0 ? target + "'s devices'" : target + "'s";
    return who + " transfer queues stalled from " + seconds(at) + " to " + seconds(until);
  }
  if (kind == FaultPlan::Kind::kProcessKilled) {
    return target + " killed at " + seconds(at) + ", restarted at " + seconds(until);
  }
  const std::string where = target.rfind("node ", 0) == 0 ? target + "'s " + ports : target;
  switch (kind) {
    case FaultPlan::Kind::kLinkDown:
      return where + " down from " + seconds(at) + " to " + seconds(until);
    case FaultPlan::Kind::kLinkDegraded: {
      char share[32];
      std::snprintf(share, sizeof share, "%g", factor);
      return where + " degraded to " + share + " of their bandwidth from " + seconds(at) + " to " +
             seconds(until);
    }
    case FaultPlan::Kind::kNicLost:
      return where + " lost (down for good) at " + seconds(at);
    case FaultPlan::Kind::kDeviceOom:
    case FaultPlan::Kind::kProcessKilled:
    case FaultPlan::Kind::kCompletionDelay:
    case FaultPlan::Kind::kQueueStall:
      break;  // above
  }
  return where;
}

std::vector<FaultTarget> fault_targets(const model::Topology& topo, const std::vector<int>& nodes,
                                       bool per_nic) {
  const model::TopologySpec& spec = topo.spec();
  const std::set<int> used(nodes.begin(), nodes.end());
  // Whether traffic between two of the run's nodes crosses the scale-up switch
  // (model/topology.cpp route_devices: same domain, not routed over scale-out).
  bool plane_between_nodes = false;
  if (!spec.scale_up_over_scale_out && spec.scale_up_nodes > 1) {
    std::set<int> domains;
    for (const int n : used) {
      plane_between_nodes = plane_between_nodes || !domains.insert(n / spec.scale_up_nodes).second;
    }
  }
  std::vector<FaultTarget> out;
  for (const int n : used) {
    std::vector<std::string> links;
    for (const std::uint32_t l : topo.node_nics(n)) links.push_back(topo.links()[l].name);
    std::string ports = "NICs";
    if (plane_between_nodes) {
      const std::vector<std::uint32_t> up = topo.node_scale_up_ports(n);
      for (const std::uint32_t l : up) links.push_back(topo.links()[l].name);
      if (!up.empty()) {
        std::string type = model::to_string(spec.scale_up.type);
        for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        ports = "NICs and " + type + " ports";
      }
    }
    if (links.empty()) continue;
    if (per_nic) {
      for (const std::string& link : links) out.push_back({link, {link}, "", {}});
    } else {
      out.push_back({"node " + std::to_string(n), links, ports, {}});
    }
  }
  return out;
}

std::vector<FaultTarget> device_targets(const model::Topology& topo, const std::vector<int>& nodes,
                                        bool per_device) {
  const int dpn = topo.spec().devices_per_node;
  std::vector<FaultTarget> out;
  for (const int n : std::set<int>(nodes.begin(), nodes.end())) {
    (void)topo.node_nics(n);  // checks the node
    if (per_device) {
      for (int d = 0; d < dpn; ++d) {
        out.push_back(
            {"device n" + std::to_string(n) + "d" + std::to_string(d), {}, "", {n * dpn + d}});
      }
    } else {
      FaultTarget t{"node " + std::to_string(n), {}, "devices", {}};
      for (int d = 0; d < dpn; ++d) t.devices.push_back(n * dpn + d);
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<DrawnFault> draw_faults(const FaultPlan& plan, std::uint64_t seed,
                                    const std::vector<FaultTarget>& targets,
                                    const std::vector<FaultTarget>& devices,
                                    const std::vector<FaultTarget>& processes) {
  if (plan.kinds.empty()) throw std::invalid_argument("fault_plan.kinds: no kinds");
  const auto has = [&](FaultPlan::Kind k) {
    return std::find(plan.kinds.begin(), plan.kinds.end(), k) != plan.kinds.end();
  };
  if (targets.empty() && (has(FaultPlan::Kind::kLinkDown) || has(FaultPlan::Kind::kLinkDegraded) ||
                          has(FaultPlan::Kind::kNicLost))) {
    throw std::invalid_argument("--faults: the run's nodes have no NIC to fail");
  }
  if (devices.empty() && std::any_of(plan.kinds.begin(), plan.kinds.end(), on_devices)) {
    throw std::invalid_argument("--faults: the run's nodes have no device to fail");
  }
  if (processes.empty() && has(FaultPlan::Kind::kProcessKilled)) {
    throw std::invalid_argument(
        "--faults: fault_plan.kinds has process_killed, which kills serving instances, and the "
        "scenario has none (an instances: section makes a serving study)");
  }
  std::mt19937_64 rng(seed);
  std::vector<DrawnFault> drawn;
  for (int i = 0; i < plan.count; ++i) {
    DrawnFault f;
    f.kind = plan.kinds[rng() % plan.kinds.size()];
    const std::vector<FaultTarget>& pool = on_devices(f.kind)                          ? devices
                                           : f.kind == FaultPlan::Kind::kProcessKilled ? processes
                                                                                       : targets;
    const FaultTarget& t = pool[rng() % pool.size()];
    f.target = t.name;
    f.ports = t.ports;
    f.links = t.links;
    f.devices = t.devices;
    f.at = draw_between(rng, plan.window_first, plan.window_last);
    const model::SimTime duration = draw_between(rng, plan.duration_first, plan.duration_last);
    f.until = f.kind == FaultPlan::Kind::kNicLost ? 0 : f.at + duration;
    f.factor = f.kind == FaultPlan::Kind::kLinkDegraded ? plan.factor : 1.0;
    f.delay = f.kind == FaultPlan::Kind::kCompletionDelay ? plan.delay : 0;
    drawn.push_back(std::move(f));
  }
  std::stable_sort(drawn.begin(), drawn.end(), [](const DrawnFault& a, const DrawnFault& b) {
    return std::tie(a.at, a.target) < std::tie(b.at, b.target);
  });
  // One target's faults never overlap: an event ending one would end the other early. A fault
  // after a NIC is lost for good would bring it back, so it is dropped.
  std::map<std::string, model::SimTime> busy_until;  // 0 after a loss: never free again
  std::set<std::string> lost;
  std::vector<DrawnFault> out;
  for (DrawnFault f : drawn) {
    const std::string key = space(f.kind) + f.target;
    if (lost.count(key) != 0) continue;
    const auto it = busy_until.find(key);
    if (it != busy_until.end() && it->second > f.at) {
      const model::SimTime shift = it->second - f.at;
      f.at += shift;
      if (f.until != 0) f.until += shift;
    }
    if (f.kind == FaultPlan::Kind::kNicLost) lost.insert(key);
    busy_until[key] = f.until;
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const DrawnFault& a, const DrawnFault& b) {
    return std::tie(a.at, a.target) < std::tie(b.at, b.target);
  });
  return out;
}

std::vector<MemoryFaultSpec> memory_faults(const std::vector<DrawnFault>& faults) {
  std::vector<MemoryFaultSpec> out;
  for (const DrawnFault& f : faults) {
    if (f.kind != FaultPlan::Kind::kDeviceOom) continue;
    for (const int d : f.devices) out.push_back({d, f.at, f.until});
  }
  return out;
}

std::vector<QueueStallSpec> queue_stalls(const std::vector<DrawnFault>& faults) {
  std::vector<QueueStallSpec> out;
  for (const DrawnFault& f : faults) {
    if (f.kind != FaultPlan::Kind::kQueueStall) continue;
    for (const int d : f.devices) out.push_back({d, f.at, f.until});
  }
  return out;
}

std::vector<CompletionDelaySpec> completion_delays(const std::vector<DrawnFault>& faults) {
  std::vector<CompletionDelaySpec> out;
  for (const DrawnFault& f : faults) {
    if (f.kind != FaultPlan::Kind::kCompletionDelay) continue;
    for (const int d : f.devices) out.push_back({d, f.at, f.until, f.delay});
  }
  return out;
}

std::vector<ProcessFaultSpec> process_faults(const std::vector<DrawnFault>& faults) {
  std::vector<ProcessFaultSpec> out;
  for (const DrawnFault& f : faults) {
    if (f.kind == FaultPlan::Kind::kProcessKilled) out.push_back({f.target, f.at, f.until});
  }
  return out;
}

std::vector<FaultSpec> link_events(const std::vector<DrawnFault>& faults) {
  std::vector<FaultSpec> out;
  for (const DrawnFault& f : faults) {
    for (const std::string& link : f.links) {  // link kinds' targets only have links
      FaultSpec start{link, f.at, {}};
      if (f.kind == FaultPlan::Kind::kLinkDegraded) {
        start.event = {model::LinkEvent::Kind::kDegrade, f.factor};
      } else {
        start.event = {model::LinkEvent::Kind::kDown};
      }
      out.push_back(start);
      if (f.until != 0) out.push_back({link, f.until, {model::LinkEvent::Kind::kUp}});
    }
  }
  return out;
}

std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  const auto bad = [&](const std::string& rule) {
    return std::invalid_argument("--faults '" + text + "': " + rule);
  };
  std::vector<std::uint64_t> seeds;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const auto number = [&](const std::string& digits) -> std::uint64_t {
      if (digits.empty() || digits.size() > 18 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        throw bad(
            "expected SEED, FIRST-LAST or a comma-separated list of them (non-negative "
            "integers below 10^18)");
      }
      return std::stoull(digits);
    };
    const std::uint64_t first = number(part.substr(0, dash));
    const std::uint64_t last = dash == std::string::npos ? first : number(part.substr(dash + 1));
    if (last < first) throw bad("'" + part + "' has FIRST > LAST");
    if (last - first + 1 > kMaxSeeds || seeds.size() + (last - first + 1) > kMaxSeeds) {
      throw bad("at most 10000 seeds per campaign");
    }
    for (std::uint64_t s = first; s <= last; ++s) seeds.push_back(s);
    start = comma + 1;
  }
  if (std::set<std::uint64_t>(seeds.begin(), seeds.end()).size() != seeds.size()) {
    throw bad("a seed is given twice");
  }
  return seeds;
}

}  // namespace kvsim::sim
