#include "crossval/fabric_recorder.h"

#include <stdexcept>

namespace kvsim::crossval {

FabricRecorder::FabricRecorder(const model::Fabric& fabric) : fabric_(fabric) {
  const model::FluidNetwork& net = fabric.network();
  for (std::uint32_t r = 0; r < net.resource_count(); ++r) {
    names_.push_back(net.resource_name(r));
    initial_.push_back(net.capacity(r));
  }
}

void FabricRecorder::on_flow_start(model::FluidNetwork::FlowId flow, std::uint64_t,
                                   model::SimTime at, double bytes,
                                   const std::vector<model::FluidNetwork::Use>& path) {
  Flow f;
  f.id = flows_.size();
  f.bytes = bytes;
  f.start = at;
  for (const model::FluidNetwork::Use& u : path) f.path.push_back({u.resource, u.weight});
  index_[flow] = flows_.size();
  flows_.push_back(std::move(f));
}

void FabricRecorder::on_flow_end(model::FluidNetwork::FlowId flow, model::SimTime at,
                                 bool completed) {
  const auto it = index_.find(flow);
  if (it == index_.end()) return;
  if (completed) {
    flows_[it->second].fabric_finish = at;
  } else {
    ++cancelled_;
  }
}

// Fabric::apply_link_event: both directions of the link take nominal x state.
void FabricRecorder::on_link_event(std::uint32_t link, model::SimTime at,
                                   const model::LinkEvent& event) {
  const model::Link& l = fabric_.topology().links().at(link);
  double factor = 1.0;
  switch (event.kind) {
    case model::LinkEvent::Kind::kDown:
      return;  // its flows are cancelled, which flow_set() refuses
    case model::LinkEvent::Kind::kUp:
      break;
    case model::LinkEvent::Kind::kDegrade:
      factor = event.factor;
      break;
  }
  for (const std::uint32_t r : {l.forward, l.backward}) {
    changes_.push_back({at, r, l.nominal_effective * factor});
  }
}

FlowSet FabricRecorder::flow_set(const std::string& name, const std::string& description) const {
  if (cancelled_ > 0) {
    throw std::logic_error(std::to_string(cancelled_) +
                           " flow(s) were cancelled by a fault; record a run without link downs");
  }
  FlowSet set;
  set.name = name;
  set.description = description;
  std::map<std::uint32_t, std::uint32_t> renumber;  // the Fabric's resource -> the set's
  auto use = [&](std::uint32_t r) {
    const auto [it, fresh] = renumber.emplace(r, static_cast<std::uint32_t>(set.resources.size()));
    if (fresh) set.resources.push_back({names_.at(r), initial_.at(r)});
    return it->second;
  };
  for (Flow f : flows_) {
    if (!f.fabric_finish) throw std::logic_error("flow " + std::to_string(f.id) + " never ended");
    for (Hop& h : f.path) h.resource = use(h.resource);
    set.flows.push_back(std::move(f));
  }
  for (CapacityChange c : changes_) {
    const auto it = renumber.find(c.resource);
    if (it == renumber.end()) continue;  // no recorded flow crosses it
    c.resource = it->second;
    set.changes.push_back(c);
  }
  return set;
}

}  // namespace kvsim::crossval
