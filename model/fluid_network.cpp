#include "model/fluid_network.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "model/errors.h"

namespace kvsim::model {
namespace {

constexpr double kPsPerSec = static_cast<double>(kSec);
// Resources whose share is within this relative distance of a round's level saturate in that
// round, so float noise between equal bottlenecks does not add rounds.
constexpr double kTieTolerance = 1e-12;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[noreturn]] void fail(ErrorKind kind, const std::string& message) {
  throw ModelError(kind, message);
}

// Time at which `remaining` bytes at `rate` are done, counted from `now`.
SimTime finish_time(SimTime now, double remaining, Bandwidth rate) {
  if (remaining <= 0) return now;
  if (!(rate > 0) || !(remaining / rate * kPsPerSec < 1.8e19)) return FluidNetwork::kNever;
  const SimTime d = transfer_time(remaining, rate);
  return d >= FluidNetwork::kNever - now ? FluidNetwork::kNever : now + d;
}

// Heap order on (time, id): "a after b", so the heap's top is the earliest completion.
bool later(SimTime at, FluidNetwork::FlowId aid, SimTime bt, FluidNetwork::FlowId bid) {
  return at != bt ? at > bt : aid > bid;
}

}  // namespace

struct FluidNetwork::EventLater {
  bool operator()(const Event& a, const Event& b) const {
    return later(a.time, a.id, b.time, b.id);
  }
};

FluidNetwork::ResourceId FluidNetwork::add_resource(std::string name, Bandwidth capacity) {
  if (!(capacity > 0) || !std::isfinite(capacity)) {
    fail(ErrorKind::kInvalidArgument,
         "add_resource: capacity of '" + name + "' must be finite and > 0, got " + num(capacity));
  }
  if (resources_.size() >= std::numeric_limits<ResourceId>::max()) {
    fail(ErrorKind::kOutOfRange, "add_resource: too many resources");
  }
  Resource r;
  r.name = std::move(name);
  r.capacity = capacity;
  r.updated = now_;
  resources_.push_back(std::move(r));
  return static_cast<ResourceId>(resources_.size() - 1);
}

void FluidNetwork::check_resource(ResourceId r, const char* what) const {
  if (r >= resources_.size()) {
    fail(ErrorKind::kOutOfRange, std::string(what) + ": unknown resource " + std::to_string(r));
  }
}

void FluidNetwork::set_capacity(ResourceId r, Bandwidth capacity) {
  check_resource(r, "set_capacity");
  if (!(capacity > 0) || !std::isfinite(capacity)) {
    fail(ErrorKind::kInvalidArgument, "set_capacity: capacity of '" + resources_[r].name +
                                          "' must be finite and > 0, got " + num(capacity));
  }
  if (resources_[r].capacity == capacity) return;
  resources_[r].capacity = capacity;
  mark_dirty(r);
}

Bandwidth FluidNetwork::capacity(ResourceId r) const {
  check_resource(r, "capacity");
  return resources_[r].capacity;
}

const std::string& FluidNetwork::resource_name(ResourceId r) const {
  check_resource(r, "resource_name");
  return resources_[r].name;
}

std::size_t FluidNetwork::resource_count() const {
  return resources_.size();
}

void FluidNetwork::mark_dirty(ResourceId r) {
  if (resources_[r].dirty) return;
  resources_[r].dirty = true;
  dirty_resources_.push_back(r);
}

FluidNetwork::FlowId FluidNetwork::add_flow(double bytes, std::vector<Use> path, Bandwidth cap) {
  if (!(bytes > 0) || !std::isfinite(bytes)) {
    fail(ErrorKind::kInvalidArgument, "add_flow: bytes must be finite and > 0, got " + num(bytes));
  }
  if (!(cap > 0)) fail(ErrorKind::kInvalidArgument, "add_flow: cap must be > 0, got " + num(cap));
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i].resource >= resources_.size()) {
      fail(ErrorKind::kOutOfRange, "add_flow: path[" + std::to_string(i) +
                                       "] names unknown resource " +
                                       std::to_string(path[i].resource));
    }
    if (!(path[i].weight > 0) || !std::isfinite(path[i].weight)) {
      fail(ErrorKind::kInvalidArgument, "add_flow: path[" + std::to_string(i) +
                                            "].weight must be finite and > 0, got " +
                                            num(path[i].weight));
    }
  }
  if (path.empty() && std::isinf(cap)) {
    fail(ErrorKind::kInvalidArgument, "add_flow: path is empty and cap is unlimited");
  }
  // Stable insertion sort (paths are short), then merge repeated resources.
  for (std::size_t i = 1; i < path.size(); ++i) {
    for (std::size_t j = i; j > 0 && path[j - 1].resource > path[j].resource; --j) {
      std::swap(path[j - 1], path[j]);
    }
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (out > 0 && path[out - 1].resource == path[i].resource) {
      path[out - 1].weight += path[i].weight;
    } else {
      path[out++] = path[i];
    }
  }
  path.resize(out);

  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
  }
  const FlowId id = next_id_++;
  Flow& f = flows_[slot];
  f.id = id;
  f.remaining = bytes;
  f.updated = now_;
  f.completion = kNever;
  f.rate = 0;
  f.cap = cap;
  f.fresh = true;
  f.path = std::move(path);
  slots_.emplace(id, slot);
  for (const Use& u : f.path) {
    resources_[u.resource].members.push_back({id, slot, u.weight});
    mark_dirty(u.resource);
  }
  if (f.path.empty()) dirty_flows_.push_back(slot);
  return id;
}

std::uint32_t FluidNetwork::slot_of(FlowId f, const char* what) const {
  const auto it = slots_.find(f);
  if (it == slots_.end()) {
    fail(ErrorKind::kOutOfRange,
         std::string(what) + ": unknown or finished flow " + std::to_string(f));
  }
  return it->second;
}

void FluidNetwork::drain(Flow& f, SimTime now, bool finished) const {
  const double nominal = f.rate * static_cast<double>(now - f.updated) / kPsPerSec;
  const double actual =
      finished || now >= f.completion ? f.remaining : std::min(nominal, f.remaining);
  // Resources integrate load*dt; credit them the difference so carried bytes stay exact.
  if (actual != nominal) {
    for (const Use& u : f.path) resources_[u.resource].carried += u.weight * (actual - nominal);
  }
  f.remaining -= actual;
  f.updated = now;
}

void FluidNetwork::retire(std::uint32_t slot) {
  Flow& f = flows_[slot];
  for (const Use& u : f.path) {
    auto& members = resources_[u.resource].members;
    const auto it = std::lower_bound(members.begin(), members.end(), f.id,
                                     [](const Member& m, FlowId id) { return m.id < id; });
    members.erase(it);
    mark_dirty(u.resource);
  }
  slots_.erase(f.id);
  f.id = kNoFlow;
  ++f.version;
  f.path.clear();
  free_slots_.push_back(slot);
}

double FluidNetwork::cancel_flow(FlowId f) {
  const std::uint32_t slot = slot_of(f, "cancel_flow");
  drain(flows_[slot], now_, false);
  const double left = flows_[slot].remaining;
  retire(slot);
  return left;
}

void FluidNetwork::advance_to(SimTime now) {
  if (now < now_) {
    fail(ErrorKind::kInvalidArgument, "advance_to: time " + std::to_string(now) +
                                          " ps is before now (" + std::to_string(now_) + " ps)");
  }
  const SimTime next = next_completion();
  if (now > next) {
    fail(ErrorKind::kInvalidArgument, "advance_to: time " + std::to_string(now) +
                                          " ps is past the next completion (" +
                                          std::to_string(next) + " ps); use complete_until");
  }
  now_ = now;
}

SimTime FluidNetwork::now() const {
  return now_;
}

SimTime FluidNetwork::next_completion() const {
  solve();
  return peek();
}

SimTime FluidNetwork::peek() const {
  while (!heap_.empty()) {
    const Event& top = heap_.front();
    const Flow& f = flows_[top.slot];
    if (f.id == top.id && f.version == top.version) return top.time;
    std::pop_heap(heap_.begin(), heap_.end(), EventLater());
    heap_.pop_back();
  }
  return kNever;
}

std::vector<FluidNetwork::FlowId> FluidNetwork::complete_until(SimTime until) {
  if (until < now_) {
    fail(ErrorKind::kInvalidArgument, "complete_until: time " + std::to_string(until) +
                                          " ps is before now (" + std::to_string(now_) + " ps)");
  }
  const SimTime t = next_completion();
  std::vector<FlowId> done;
  if (t > until || t == kNever) {
    if (until != kNever) now_ = until;  // kNever means "no bound", not a time to move to
    return done;
  }
  now_ = t;
  while (peek() == t) {
    const Event e = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), EventLater());
    heap_.pop_back();
    done.push_back(e.id);
    drain(flows_[e.slot], t, true);
    retire(e.slot);
  }
  return done;
}

Bandwidth FluidNetwork::rate(FlowId f) const {
  const std::uint32_t slot = slot_of(f, "rate");
  solve();
  return flows_[slot].rate;
}

double FluidNetwork::remaining_bytes(FlowId f) const {
  // Rates of dirty components still hold up to now, so no solve is needed.
  const Flow& fl = flows_[slot_of(f, "remaining_bytes")];
  if (now_ >= fl.completion) return 0;
  const double left = fl.remaining - fl.rate * static_cast<double>(now_ - fl.updated) / kPsPerSec;
  return std::max(0.0, left);
}

bool FluidNetwork::active(FlowId f) const {
  return slots_.count(f) != 0;
}

std::size_t FluidNetwork::active_flows() const {
  return slots_.size();
}

Bandwidth FluidNetwork::load(ResourceId r) const {
  check_resource(r, "load");
  solve();
  return resources_[r].load;
}

double FluidNetwork::carried_bytes(ResourceId r) const {
  check_resource(r, "carried_bytes");
  solve();
  const Resource& res = resources_[r];
  return res.carried + res.load * static_cast<double>(now_ - res.updated) / kPsPerSec;
}

void FluidNetwork::solve() const {
  if (dirty_resources_.empty() && dirty_flows_.empty()) return;
  const std::uint64_t epoch = ++epoch_;
  fill_.resize(resources_.size());
  comp_resources_.reset(resources_.size());
  stack_.reset(resources_.size());
  comp_flows_.reset(flows_.size());
  capped_.reset(flows_.size());
  for (const ResourceId r : dirty_resources_) {
    resources_[r].dirty = false;
    if (resources_[r].mark != epoch) {
      resources_[r].mark = epoch;
      stack_.push(r);
    }
  }
  // Gather the connected components (flows linked through shared resources) of dirty resources,
  // initialising the filling state of each resource on the way.
  while (stack_.size > 0) {
    const ResourceId r = stack_.items[--stack_.size];
    comp_resources_.push(r);
    const Resource& res = resources_[r];
    double weight = 0;
    for (const Member& m : res.members) {
      weight += m.weight;
      Flow& f = flows_[m.slot];
      if (f.mark == epoch) continue;
      f.mark = epoch;
      f.frozen = false;
      comp_flows_.push(m.slot);
      if (std::isfinite(f.cap)) capped_.push(m.slot);
      for (const Use& u : f.path) {
        Resource& q = resources_[u.resource];
        if (q.mark == epoch) continue;
        q.mark = epoch;
        stack_.push(u.resource);
      }
    }
    Fill& s = fill_[r];
    s.free_capacity = res.capacity;
    s.unfrozen_weight = weight;
    s.unfrozen = static_cast<std::uint32_t>(res.members.size());
    s.share = s.unfrozen > 0 ? res.capacity / weight : 0;
    s.load = 0;
  }
  for (const std::uint32_t slot : dirty_flows_) {
    Flow& f = flows_[slot];
    if (f.id == kNoFlow || !f.path.empty() || f.mark == epoch) continue;
    f.mark = epoch;
    f.frozen = false;
    comp_flows_.push(slot);
    capped_.push(slot);
  }
  dirty_resources_.clear();
  dirty_flows_.clear();
  // Id order, for determinism; a scan beats sorting when the component spans most resources.
  if (comp_resources_.size * 8 > resources_.size()) {
    comp_resources_.size = 0;
    for (ResourceId r = 0; r < resources_.size(); ++r) {
      if (resources_[r].mark == epoch) comp_resources_.push(r);
    }
  } else {
    std::sort(comp_resources_.begin(), comp_resources_.end());
  }

  fill();

  changed_.reset(comp_flows_.size);
  for (const std::uint32_t slot : comp_flows_) {
    Flow& f = flows_[slot];
    if (!f.fresh && f.new_rate == f.rate) continue;
    drain(f, now_, false);
    f.fresh = false;
    f.rate = f.new_rate;
    f.completion = finish_time(now_, f.remaining, f.rate);
    ++f.version;
    changed_.push(slot);
  }
  for (const ResourceId r : comp_resources_) {
    Resource& res = resources_[r];
    res.carried += res.load * static_cast<double>(now_ - res.updated) / kPsPerSec;
    res.updated = now_;
    res.load = fill_[r].load;
  }

  // Lazy invalidation leaves stale entries behind: rebuild the heap in O(n) when many flows were
  // rescheduled or stale entries dominate, else push the rescheduled ones.
  if (changed_.size * 4 > slots_.size() || heap_.size() + changed_.size > 2 * slots_.size() + 64) {
    heap_.clear();
    for (std::uint32_t slot = 0; slot < flows_.size(); ++slot) {
      const Flow& f = flows_[slot];
      if (f.id != kNoFlow && f.completion != kNever) {
        heap_.push_back({f.completion, f.id, slot, f.version});
      }
    }
    std::make_heap(heap_.begin(), heap_.end(), EventLater());
  } else {
    for (const std::uint32_t slot : changed_) {
      const Flow& f = flows_[slot];
      if (f.completion == kNever) continue;
      heap_.push_back({f.completion, f.id, slot, f.version});
      std::push_heap(heap_.begin(), heap_.end(), EventLater());
    }
  }
}

void FluidNetwork::freeze(std::uint32_t slot, double level, std::size_t& unfrozen) const {
  Flow& f = flows_[slot];
  if (f.frozen) return;
  f.frozen = true;
  f.new_rate = std::min(level, f.cap);
  --unfrozen;
  for (const Use& u : f.path) {
    Fill& s = fill_[u.resource];
    s.free_capacity -= u.weight * f.new_rate;
    s.load += u.weight * f.new_rate;
    s.unfrozen_weight -= u.weight;
    if (--s.unfrozen > 0) s.share = std::max(0.0, s.free_capacity) / s.unfrozen_weight;
  }
}

void FluidNetwork::fill() const {
  active_resources_.reset(comp_resources_.size);
  saturated_.reset(comp_resources_.size);
  for (const ResourceId r : comp_resources_) {
    if (fill_[r].unfrozen > 0) active_resources_.push(r);
  }
  std::sort(capped_.begin(), capped_.end(), [this](std::uint32_t a, std::uint32_t b) {
    const Flow& fa = flows_[a];
    const Flow& fb = flows_[b];
    return fa.cap != fb.cap ? fa.cap < fb.cap : fa.id < fb.id;
  });

  // Progressive filling: every unfrozen flow runs at `level`; each round raises it to the next
  // saturation point (a resource's fair share or a flow's cap) and freezes the flows held there.
  std::size_t unfrozen = comp_flows_.size;
  std::size_t next_cap = 0;
  while (unfrozen > 0) {
    while (next_cap < capped_.size && flows_[capped_.items[next_cap]].frozen) ++next_cap;
    double level = next_cap < capped_.size ? flows_[capped_.items[next_cap]].cap
                                           : std::numeric_limits<double>::infinity();
    double limit = level * (1 + kTieTolerance);
    // One pass: drop resources with no unfrozen flow, find the lowest share, and collect the
    // resources near it (re-filtered below, as the minimum may drop after a candidate was taken).
    saturated_.size = 0;
    std::size_t kept = 0;
    for (const ResourceId r : active_resources_) {
      const Fill& s = fill_[r];
      if (s.unfrozen == 0) continue;
      active_resources_.items[kept++] = r;
      if (s.share > limit) continue;
      saturated_.push(r);
      if (s.share < level) {
        level = s.share;
        limit = level * (1 + kTieTolerance);
      }
    }
    active_resources_.size = kept;
    if (!(level < std::numeric_limits<double>::infinity())) break;  // unreachable: see add_flow

    // Freezing updates shares as it goes, so the saturated set is fixed first.
    for (const ResourceId r : saturated_) {
      if (fill_[r].share > limit) continue;
      for (const Member& m : resources_[r].members) freeze(m.slot, level, unfrozen);
    }
    for (; next_cap < capped_.size && flows_[capped_.items[next_cap]].cap <= limit; ++next_cap) {
      freeze(capped_.items[next_cap], level, unfrozen);
    }
  }
}

}  // namespace kvsim::model
