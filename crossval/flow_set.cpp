#include "crossval/flow_set.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include "model/fluid_network.h"

namespace kvsim::crossval {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& rule) {
  throw std::invalid_argument(where + ": " + rule);
}

double positive(const json& j, const std::string& where) {
  if (!j.is_number()) bad(where, "must be a number");
  const double v = j.get<double>();
  if (!(v > 0) || !std::isfinite(v)) bad(where, "must be finite and > 0");
  return v;
}

model::SimTime time_ps(const json& j, const std::string& where) {
  if (!j.is_number_unsigned()) bad(where, "must be a non-negative integer (ps)");
  return j.get<model::SimTime>();
}

}  // namespace

void FlowSet::validate() const {
  for (std::size_t i = 0; i < resources.size(); ++i) {
    if (!(resources[i].capacity > 0) || !std::isfinite(resources[i].capacity)) {
      bad("resources[" + std::to_string(i) + "].capacity", "must be finite and > 0");
    }
  }
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const std::string at = "flows[" + std::to_string(i) + "]";
    if (!(flows[i].bytes > 0) || !std::isfinite(flows[i].bytes)) bad(at + ".bytes", "must be > 0");
    if (flows[i].path.empty()) bad(at + ".path", "must name at least one resource");
    if (!(flows[i].cap > 0)) bad(at + ".cap", "must be > 0");
    for (std::size_t h = 0; h < flows[i].path.size(); ++h) {
      const Hop& hop = flows[i].path[h];
      const std::string where = at + ".path[" + std::to_string(h) + "]";
      if (hop.resource >= resources.size()) bad(where + ".resource", "names no resource");
      if (!(hop.weight > 0) || !std::isfinite(hop.weight)) bad(where + ".weight", "must be > 0");
    }
  }
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const std::string at = "capacity_changes[" + std::to_string(i) + "]";
    if (changes[i].resource >= resources.size()) bad(at + ".resource", "names no resource");
    if (!(changes[i].capacity > 0)) bad(at + ".capacity", "must be > 0");
  }
}

FlowSet read_flow_set(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad(path, "cannot be read");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    bad(path, std::string("is not JSON: ") + e.what());
  }
  FlowSet set;
  set.name = j.value("name", "");
  set.description = j.value("description", "");
  for (const json& r : j.at("resources")) {
    set.resources.push_back({r.value("name", ""), positive(r.at("capacity"), "capacity")});
  }
  for (const json& f : j.at("flows")) {
    Flow flow;
    flow.id = f.at("id").get<std::uint64_t>();
    flow.bytes = positive(f.at("bytes"), "flow bytes");
    flow.start = time_ps(f.at("start_ps"), "flow start_ps");
    for (const json& h : f.at("path")) {
      flow.path.push_back({h.at("resource").get<std::uint32_t>(), h.value("weight", 1.0)});
    }
    if (f.contains("cap") && !f.at("cap").is_null()) flow.cap = positive(f.at("cap"), "flow cap");
    if (f.contains("fabric_finish_ps")) {
      flow.fabric_finish = time_ps(f.at("fabric_finish_ps"), "fabric_finish_ps");
    }
    set.flows.push_back(std::move(flow));
  }
  if (j.contains("capacity_changes")) {
    for (const json& c : j.at("capacity_changes")) {
      set.changes.push_back({time_ps(c.at("at_ps"), "at_ps"), c.at("resource").get<std::uint32_t>(),
                             positive(c.at("capacity"), "capacity")});
    }
  }
  set.validate();
  return set;
}

void write_flow_set(const FlowSet& set, const std::string& path) {
  json j;
  j["name"] = set.name;
  j["description"] = set.description;
  j["resources"] = json::array();
  for (const Resource& r : set.resources) {
    j["resources"].push_back({{"name", r.name}, {"capacity", r.capacity}});
  }
  j["flows"] = json::array();
  for (const Flow& f : set.flows) {
    json flow = {{"id", f.id}, {"bytes", f.bytes}, {"start_ps", f.start}, {"path", json::array()}};
    for (const Hop& h : f.path)
      flow["path"].push_back({{"resource", h.resource}, {"weight", h.weight}});
    if (std::isfinite(f.cap)) flow["cap"] = f.cap;
    if (f.fabric_finish) flow["fabric_finish_ps"] = *f.fabric_finish;
    j["flows"].push_back(std::move(flow));
  }
  j["capacity_changes"] = json::array();
  for (const CapacityChange& c : set.changes) {
    j["capacity_changes"].push_back(
        {{"at_ps", c.at}, {"resource", c.resource}, {"capacity", c.capacity}});
  }
  std::ofstream out(path);
  out << j.dump(1) << '\n';
  if (!out) bad(path, "cannot be written");
}

std::vector<Finish> run_fluid(const FlowSet& set) {
  set.validate();
  model::FluidNetwork net;
  for (const Resource& r : set.resources) net.add_resource(r.name, r.capacity);
  // Starts and capacity changes in time order; at one time, changes before starts.
  std::vector<std::size_t> starts(set.flows.size());
  for (std::size_t i = 0; i < starts.size(); ++i) starts[i] = i;
  std::stable_sort(starts.begin(), starts.end(), [&](std::size_t a, std::size_t b) {
    return set.flows[a].start < set.flows[b].start;
  });
  std::vector<CapacityChange> changes = set.changes;
  std::stable_sort(changes.begin(), changes.end(),
                   [](const CapacityChange& a, const CapacityChange& b) { return a.at < b.at; });
  std::map<model::FluidNetwork::FlowId, std::uint64_t> owner;
  std::vector<Finish> finishes;
  std::size_t next_start = 0, next_change = 0;
  while (next_start < starts.size() || next_change < changes.size() || net.active_flows() > 0) {
    model::SimTime next = model::FluidNetwork::kNever;
    if (next_start < starts.size()) next = set.flows[starts[next_start]].start;
    if (next_change < changes.size()) next = std::min(next, changes[next_change].at);
    const std::vector<model::FluidNetwork::FlowId> done = net.complete_until(next);
    for (model::FluidNetwork::FlowId f : done) finishes.push_back({owner.at(f), net.now()});
    if (!done.empty()) continue;
    while (next_change < changes.size() && changes[next_change].at == next) {
      net.set_capacity(changes[next_change].resource, changes[next_change].capacity);
      ++next_change;
    }
    while (next_start < starts.size() && set.flows[starts[next_start]].start == next) {
      const Flow& f = set.flows[starts[next_start]];
      std::vector<model::FluidNetwork::Use> path;
      for (const Hop& h : f.path) path.push_back({h.resource, h.weight});
      owner[net.add_flow(f.bytes, std::move(path), f.cap)] = f.id;
      ++next_start;
    }
  }
  std::sort(finishes.begin(), finishes.end(),
            [](const Finish& a, const Finish& b) { return a.id < b.id; });
  return finishes;
}

}  // namespace kvsim::crossval
