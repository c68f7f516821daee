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
// Demand is summed in units of 2^-16 B/s. A term at or above 2^90 units (~1.9e22 B/s) is not
// summed but counted as huge, so a sum of up to 2^32 terms cannot overflow 128 bits.
constexpr double kDemandScale = 0x1p16;
constexpr double kDemandLimit = 0x1p90;

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

// A whole non-negative double below 2^122 as a demand sum (via 64 bits when it fits: the direct
// conversion is a library call).
__extension__ using Units = unsigned __int128;
Units to_units(double whole) {
  return whole < 0x1p64 ? static_cast<std::uint64_t>(whole) : static_cast<Units>(whole);
}

}  // namespace

// Heap order on (time, id): "a after b", so the heap's top is the earliest completion.
struct FluidNetwork::EventLater {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time > b.time : a.id > b.id;
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
  r.room = room(capacity);
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
  Resource& res = resources_[r];
  if (res.capacity == capacity) return;
  drop_history();
  // The bounds of r's flows change, and with them the demand on every resource they cross.
  for (const Member& m : res.members) count_demand(flows_[m.slot], false);
  res.capacity = capacity;
  res.room = room(capacity);
  for (const Member& m : res.members) {
    bound(flows_[m.slot]);
    count_demand(flows_[m.slot], true);
  }
  mark_dirty(r);  // its flows have new bounds, whether r binds or not
  update_binding(r);
  for (const Member& m : res.members) {
    for (const Use& u : flows_[m.slot].path) update_binding(u.resource);
  }
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

void FluidNetwork::bound(Flow& f) const {
  f.ub = f.cap;
  f.ub_use = static_cast<std::uint32_t>(f.path.size());
  for (std::uint32_t i = 0; i < f.path.size(); ++i) {
    const double b = resources_[f.path[i].resource].capacity / f.path[i].weight;
    if (b < f.ub) {
      f.ub = b;
      f.ub_use = i;
    }
  }
}

// Terms are rounded up and capacities down, so slackness is never claimed wrongly. Equality
// fits: flows whose bounds sum to exactly the capacity saturate it, as a solve with the resource
// would also give them.
void FluidNetwork::Demand::count(double rate, bool add) {
  const double term = std::ceil(rate * kDemandScale);
  if (!(term < kDemandLimit)) {
    add ? ++huge : --huge;
    return;
  }
  add ? sum += to_units(term) : sum -= to_units(term);
}

// Capacity in demand units; beyond 2^122 it exceeds any demand sum (at most 2^32 terms < 2^90).
FluidNetwork::Demand::Sum FluidNetwork::room(Bandwidth capacity) {
  const double units = std::floor(capacity * kDemandScale);
  return units < 0x1p122 ? to_units(units) : ~Demand::Sum{0};
}

void FluidNetwork::count_demand(const Flow& f, bool add) {
  const bool by_cap = f.ub_use == f.path.size();
  for (std::uint32_t i = 0; i < f.path.size(); ++i) {
    const Use& u = f.path[i];
    Resource& q = resources_[u.resource];
    q.demand.count(u.weight * f.ub, add);
    if (by_cap || i == f.ub_use) {
      q.grouped.count(u.weight * f.ub, add);
      if (!by_cap) add ? ++q.keyed : --q.keyed;
      continue;
    }
    const ResourceId key = f.path[f.ub_use].resource;
    const double ratio = u.weight / f.path[f.ub_use].weight;
    auto g = std::find_if(q.groups.begin(), q.groups.end(),
                          [&](const Group& x) { return x.key == key && x.ratio == ratio; });
    if (add && g != q.groups.end()) {
      ++g->count;
    } else if (add) {
      q.groups.push_back({key, ratio, 1});
      q.grouped.count(ratio * resources_[key].capacity, true);
    } else if (--g->count == 0) {
      q.grouped.count(ratio * resources_[key].capacity, false);
      *g = q.groups.back();
      q.groups.pop_back();
    }
  }
}

// Grouped demand bounds the rate through r only if every group key s is enforced: binding, or
// slack by its plain demand (its flows' bounds then keep it). So a key, a resource setting some
// flow's bound, may not be slack by grouped demand itself; such a slackness would be degenerate
// anyway, as the flow it bounds alone fills the grouped demand.
void FluidNetwork::update_binding(ResourceId r) {
  Resource& res = resources_[r];
  const bool binding = !res.demand.fits(res.room) && (res.keyed > 0 || !res.grouped.fits(res.room));
  if (binding == res.binding) return;
  res.binding = binding;
  drop_history();  // the set of resources in the filling changes
  mark_dirty(r);
}

void FluidNetwork::integrate(Resource& r) const {
  if (r.updated == now_) return;
  r.carried += r.load * static_cast<double>(now_ - r.updated) / kPsPerSec;
  r.updated = now_;
}

FluidNetwork::FlowId FluidNetwork::add_flow(double bytes, const std::vector<Use>& given,
                                            Bandwidth cap) {
  if (!(bytes > 0) || !std::isfinite(bytes)) {
    fail(ErrorKind::kInvalidArgument, "add_flow: bytes must be finite and > 0, got " + num(bytes));
  }
  if (!(cap > 0)) fail(ErrorKind::kInvalidArgument, "add_flow: cap must be > 0, got " + num(cap));
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i].resource >= resources_.size()) {
      fail(ErrorKind::kOutOfRange, "add_flow: path[" + std::to_string(i) +
                                       "] names unknown resource " +
                                       std::to_string(given[i].resource));
    }
    if (!(given[i].weight > 0) || !std::isfinite(given[i].weight)) {
      fail(ErrorKind::kInvalidArgument, "add_flow: path[" + std::to_string(i) +
                                            "].weight must be finite and > 0, got " +
                                            num(given[i].weight));
    }
  }
  if (given.empty() && std::isinf(cap)) {
    fail(ErrorKind::kInvalidArgument, "add_flow: path is empty and cap is unlimited");
  }
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    frozen_.push_back(0);
  }
  // The slot keeps its path's storage from the flow that had it before.
  std::vector<Use>& path = flows_[slot].path;
  path.assign(given.begin(), given.end());
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

  const FlowId id = next_id_++;
  drop_history();
  Flow& f = flows_[slot];
  f.id = id;
  f.remaining = bytes;
  f.updated = now_;
  f.completion = kNever;
  f.rate = 0;
  f.cap = cap;
  f.fresh = true;
  bound(f);
  count_demand(f, true);
  slots_.emplace(id, slot);
  // Only binding resources link f to other flows; one that turns binding now is among them.
  for (const Use& u : f.path) {
    resources_[u.resource].members.push_back({id, slot, u.weight});
    if (u.weight != std::floor(u.weight)) ++resources_[u.resource].fractional;
    update_binding(u.resource);
  }
  for (const Use& u : f.path) {
    if (resources_[u.resource].binding) mark_dirty(u.resource);
  }
  dirty_flows_.push_back(slot);
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

void FluidNetwork::note_end(const Flow& f) const {
  if (f.mark != epoch_) return drop_history();  // not in the last filling
  if (f.round == kNoRound) return;  // held by no binding resource: its end changes no rate
  const std::size_t begin = ended_uses_.size();
  for (const Use& u : f.path) {
    if (u.resource >= fill_.size() || fill_[u.resource].epoch != epoch_) continue;  // slack
    // Whole weights keep the filling's weight sums exact, whatever the order of the terms.
    if (resources_[u.resource].fractional > 0) {
      ended_uses_.resize(begin);
      return drop_history();
    }
    ended_uses_.push_back(u);
  }
  ended_round_ = std::min(ended_round_, f.round);
}

void FluidNetwork::retire(std::uint32_t slot) {
  Flow& f = flows_[slot];
  if (history_ok_) note_end(f);
  for (const Use& u : f.path) {
    Resource& q = resources_[u.resource];
    if (q.binding) mark_dirty(u.resource);  // flows sharing it may speed up
    integrate(q);
    auto& members = q.members;
    const auto it = std::lower_bound(members.begin(), members.end(), f.id,
                                     [](const Member& m, FlowId id) { return m.id < id; });
    members.erase(it);
    if (u.weight != std::floor(u.weight)) --q.fractional;
    q.load = members.empty() ? 0 : q.load - u.weight * f.rate;
  }
  count_demand(f, false);
  for (const Use& u : f.path) update_binding(u.resource);
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
  std::vector<FlowId> done;
  complete_until(until, done);
  return done;
}

void FluidNetwork::complete_until(SimTime until, std::vector<FlowId>& done) {
  done.clear();
  if (until < now_) {
    fail(ErrorKind::kInvalidArgument, "complete_until: time " + std::to_string(until) +
                                          " ps is before now (" + std::to_string(now_) + " ps)");
  }
  const SimTime t = next_completion();
  if (t > until || t == kNever) {
    if (until != kNever) now_ = until;  // kNever means "no bound", not a time to move to
    return;
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
  return carried_bytes_at(r, now_);
}

double FluidNetwork::carried_bytes_at(ResourceId r, SimTime at) const {
  check_resource(r, "carried_bytes_at");
  if (at < now_) throw std::invalid_argument("FluidNetwork::carried_bytes_at: time in the past");
  solve();
  const Resource& res = resources_[r];
  return res.carried + res.load * static_cast<double>(at - res.updated) / kPsPerSec;
}

void FluidNetwork::gather(std::uint32_t slot, std::uint64_t epoch) const {
  Flow& f = flows_[slot];
  f.mark = epoch;
  f.round = kNoRound;
  comp_flows_.push(slot);
  bool bound = false;
  for (const Use& u : f.path) {
    Resource& q = resources_[u.resource];
    if (!q.binding) continue;
    bound = true;
    if (q.mark == epoch) continue;
    q.mark = epoch;
    stack_.push(u.resource);
  }
  // Held by no binding resource: nothing but its bound limits it.
  frozen_[slot] = !bound;
  f.new_rate = f.ub;
  // The bound is a cap for the filling unless a binding resource already implies it.
  if (bound && (f.ub_use == f.path.size() || !resources_[f.path[f.ub_use].resource].binding)) {
    capped_.push(slot);
  }
}

void FluidNetwork::solve() const {
  if (dirty_resources_.empty() && dirty_flows_.empty()) return;
  if (refill()) return;
  const std::uint64_t epoch = ++epoch_;
  rounds_.clear();
  undo_.clear();
  frozen_order_.clear();
  ended_round_ = kNoRound;
  ended_uses_.clear();
  gone_.clear();
  gone_uses_.clear();
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
  for (const std::uint32_t slot : dirty_flows_) {
    if (flows_[slot].id != kNoFlow && flows_[slot].mark != epoch) gather(slot, epoch);
  }
  dirty_resources_.clear();
  dirty_flows_.clear();
  // Gather the flows of dirty resources and the connected components (flows linked through
  // binding resources) they belong to, initialising the filling state of binding resources. A
  // dirty slack resource (one that just turned slack) only contributes its flows.
  while (stack_.size > 0) {
    const ResourceId r = stack_.items[--stack_.size];
    const Resource& res = resources_[r];
    double weight = 0;
    for (const Member& m : res.members) {
      weight += m.weight;
      if (flows_[m.slot].mark != epoch) gather(m.slot, epoch);
    }
    if (!res.binding) continue;
    comp_resources_.push(r);
    Fill& s = fill_[r];
    s.free_capacity = res.capacity;
    s.unfrozen_weight = weight;
    s.unfrozen = static_cast<std::uint32_t>(res.members.size());
    s.share = s.unfrozen > 0 ? res.capacity / weight : 0;
    s.load = 0;
    s.epoch = epoch;
    s.saved_round = kNoRound;
  }
  // Id order, for determinism; a scan beats sorting when the component spans most resources.
  if (comp_resources_.size * 8 > resources_.size()) {
    comp_resources_.size = 0;
    for (ResourceId r = 0; r < resources_.size(); ++r) {
      if (fill_[r].epoch == epoch) comp_resources_.push(r);
    }
  } else {
    std::sort(comp_resources_.begin(), comp_resources_.end());
  }

  fill();
  history_ok_ = incremental_;
  apply_rates();
}

bool FluidNetwork::refill() const {
  if (!history_ok_ || !dirty_flows_.empty() || ended_round_ == kNoRound) return false;
  // Only flows of the last filling ended since it (anything else dropped the history), and the
  // resources they marked dirty are all in it.
  for (const ResourceId r : dirty_resources_) resources_[r].dirty = false;
  dirty_resources_.clear();
  const std::uint32_t first = ended_round_;
  const Round start = rounds_[first];
  // Every resource back to its state when round `first` began (the oldest saved entry wins).
  for (std::size_t i = undo_.size(); i-- > start.undo_begin;) {
    fill_[undo_[i].resource] = undo_[i].state;
  }
  undo_.resize(start.undo_begin);
  // The flows frozen from that round on thaw; ended ones stay frozen, as they are gone.
  comp_flows_.reset(flows_.size());
  std::size_t unfrozen = 0;
  for (std::size_t i = start.freezes_begin; i < frozen_order_.size(); ++i) {
    const std::uint32_t slot = frozen_order_[i];
    Flow& f = flows_[slot];
    if (f.id == kNoFlow) continue;
    frozen_[slot] = false;
    comp_flows_.push(slot);
    ++unfrozen;
  }
  frozen_order_.resize(start.freezes_begin);
  rounds_.resize(first);
  // The ended flows were unfrozen then: take their weights off. So were the flows ended at
  // earlier refills, where the restored state predates their end.
  // gone_ stays sorted by `clean`: the entries to take off are a suffix, and get `first`.
  const std::size_t taken_off = undo_.size();
  for (auto g = gone_.rbegin(); g != gone_.rend() && g->clean > first; ++g) {
    for (std::uint32_t i = g->uses_begin; i < g->uses_end; ++i) {
      take_off(gone_uses_[i].resource, gone_uses_[i].weight);
    }
    g->clean = first;
  }
  const auto begin = static_cast<std::uint32_t>(gone_uses_.size());
  for (const Use& u : ended_uses_) {
    take_off(u.resource, u.weight);
    gone_uses_.push_back(u);
  }
  gone_.push_back({begin, static_cast<std::uint32_t>(gone_uses_.size()), first});
  // kTakenOff marked each resource once for this refill only.
  for (std::size_t i = taken_off; i < undo_.size(); ++i) {
    fill_[undo_[i].resource].saved_round = undo_[i].state.saved_round;
  }
  ended_round_ = kNoRound;
  ended_uses_.clear();
  fill_rounds(first, unfrozen, start.next_cap);
  apply_rates();
  ++refills_;
  return true;
}

void FluidNetwork::take_off(ResourceId r, double w) const {
  Fill& s = fill_[r];
  // Logged like a freeze, between the rounds before and the rounds after: a later refill from an
  // earlier round restores the state that still counted the flow (and takes it off again).
  if (s.saved_round != kTakenOff) {
    undo_.push_back({r, s});
    s.saved_round = kTakenOff;
  }
  s.unfrozen_weight -= w;
  if (--s.unfrozen > 0) s.share = std::max(0.0, s.free_capacity) / s.unfrozen_weight;
}

void FluidNetwork::apply_rates() const {
  // Binding resources of the component take their load from the filling; slack resources on the
  // path of a flow whose rate changed take the difference.
  changed_.reset(comp_flows_.size);
  for (const std::uint32_t slot : comp_flows_) {
    Flow& f = flows_[slot];
    if (!f.fresh && f.new_rate == f.rate) continue;
    drain(f, now_, false);
    for (const Use& u : f.path) {
      Resource& q = resources_[u.resource];
      if (q.binding) continue;
      integrate(q);
      q.load += u.weight * (f.new_rate - f.rate);
    }
    f.fresh = false;
    f.rate = f.new_rate;
    f.completion = finish_time(now_, f.remaining, f.rate);
    ++f.version;
    changed_.push(slot);
  }
  for (const ResourceId r : comp_resources_) {
    Resource& res = resources_[r];
    integrate(res);
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
  if (frozen_[slot]) return;
  frozen_[slot] = true;
  Flow& f = flows_[slot];
  f.new_rate = std::min(level, f.ub);
  --unfrozen;
  if (incremental_) {
    f.round = round_;
    frozen_order_.push_back(slot);
  }
  for (const Use& u : f.path) {
    Fill& s = fill_[u.resource];
    if (s.epoch != epoch_) continue;                // slack
    if (incremental_ && s.saved_round != round_) {  // its state as the round began, once
      undo_.push_back({u.resource, s});
      s.saved_round = round_;
    }
    s.free_capacity -= u.weight * f.new_rate;
    s.load += u.weight * f.new_rate;
    s.unfrozen_weight -= u.weight;
    if (--s.unfrozen > 0) s.share = std::max(0.0, s.free_capacity) / s.unfrozen_weight;
  }
}

void FluidNetwork::fill() const {
  std::sort(capped_.begin(), capped_.end(), [this](std::uint32_t a, std::uint32_t b) {
    const Flow& fa = flows_[a];
    const Flow& fb = flows_[b];
    return fa.ub != fb.ub ? fa.ub < fb.ub : fa.id < fb.id;
  });
  std::size_t unfrozen = 0;
  for (const std::uint32_t slot : comp_flows_) unfrozen += frozen_[slot] ? 0 : 1;
  fill_rounds(0, unfrozen, 0);
}

void FluidNetwork::fill_rounds(std::uint32_t first, std::size_t unfrozen,
                               std::size_t next_cap) const {
  active_resources_.reset(comp_resources_.size);
  saturated_.reset(comp_resources_.size);
  for (const ResourceId r : comp_resources_) {
    if (fill_[r].unfrozen > 0) active_resources_.push(r);
  }
  // Progressive filling: every unfrozen flow runs at `level`; each round raises it to the next
  // saturation point (a resource's fair share or a flow's cap) and freezes the flows held there.
  for (round_ = first; unfrozen > 0; ++round_) {
    if (incremental_) {
      rounds_.push_back({static_cast<std::uint32_t>(frozen_order_.size()),
                         static_cast<std::uint32_t>(undo_.size()),
                         static_cast<std::uint32_t>(next_cap)});
    }
    while (next_cap < capped_.size && frozen_[capped_.items[next_cap]]) ++next_cap;
    double level = next_cap < capped_.size ? flows_[capped_.items[next_cap]].ub
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
    for (; next_cap < capped_.size && flows_[capped_.items[next_cap]].ub <= limit; ++next_cap) {
      freeze(capped_.items[next_cap], level, unfrozen);
    }
  }
}

}  // namespace kvsim::model
