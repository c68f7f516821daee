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
  }
  return "?";
}

std::string DrawnFault::describe() const {
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
      for (const std::string& link : links) out.push_back({link, {link}, ""});
    } else {
      out.push_back({"node " + std::to_string(n), links, ports});
    }
  }
  return out;
}

std::vector<DrawnFault> draw_faults(const FaultPlan& plan, std::uint64_t seed,
                                    const std::vector<FaultTarget>& targets) {
  if (targets.empty()) throw std::invalid_argument("--faults: the run's nodes have no NIC to fail");
  if (plan.kinds.empty()) throw std::invalid_argument("fault_plan.kinds: no kinds");
  std::mt19937_64 rng(seed);
  std::vector<DrawnFault> drawn;
  for (int i = 0; i < plan.count; ++i) {
    DrawnFault f;
    f.kind = plan.kinds[rng() % plan.kinds.size()];
    const FaultTarget& t = targets[rng() % targets.size()];
    f.target = t.name;
    f.ports = t.ports;
    f.links = t.links;
    f.at = draw_between(rng, plan.window_first, plan.window_last);
    const model::SimTime duration = draw_between(rng, plan.duration_first, plan.duration_last);
    f.until = f.kind == FaultPlan::Kind::kNicLost ? 0 : f.at + duration;
    f.factor = f.kind == FaultPlan::Kind::kLinkDegraded ? plan.factor : 1.0;
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
    if (lost.count(f.target) != 0) continue;
    const auto it = busy_until.find(f.target);
    if (it != busy_until.end() && it->second > f.at) {
      const model::SimTime shift = it->second - f.at;
      f.at += shift;
      if (f.until != 0) f.until += shift;
    }
    if (f.kind == FaultPlan::Kind::kNicLost) lost.insert(f.target);
    busy_until[f.target] = f.until;
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const DrawnFault& a, const DrawnFault& b) {
    return std::tie(a.at, a.target) < std::tie(b.at, b.target);
  });
  return out;
}

std::vector<FaultSpec> link_events(const std::vector<DrawnFault>& faults) {
  std::vector<FaultSpec> out;
  for (const DrawnFault& f : faults) {
    for (const std::string& link : f.links) {
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
