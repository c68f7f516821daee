// Flow-level (fluid) bandwidth sharing: max-min fair rates over shared resources, recomputed
// only when a flow starts or ends or a capacity changes, with exact-picosecond completion times.
// Pure C++ (no SystemC): the Fabric drives it from simulated time.
#pragma once

#include <cstdint>
#include <limits>
#include <memory_resource>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/units.h"

namespace kvsim::model {

/// A set of resources (HBM ports, DMA engines, link directions) and the flows crossing them.
/// Rates are weighted max-min fair: each flow f gets rate x_f such that for every resource r,
/// sum_f weight(f,r) * x_f <= capacity(r), and no x_f can grow without shrinking a smaller one.
/// A flow may also carry its own rate cap. Deterministic: same calls, same results, bit for bit.
///
/// Solving is incremental and exact. Each flow has an upper bound ub(f) on its rate (its cap and
/// capacity/weight of every resource on its path). A resource r is slack when its demand, the sum
/// over its flows of weight * ub, fits its capacity; or when its grouped demand does, where flows
/// whose ub is set by one resource s count once per (s, weight ratio), as ratio * capacity(s) (s
/// itself must then be binding or slack by plain demand). A slack resource can never constrain the
/// allocation, so it is left out of the solve and does not link flows into one component (an HBM
/// port or a DMA engine shared by flows bottlenecked on their links). Only the components of
/// binding resources touched since the last solve are recomputed.
///
/// When flows only ended since the last solve, the filling restarts from the round where the
/// first of them froze rather than from zero: no round below that level can change (a flow froze
/// at its first saturating resource, so none of its resources saturated earlier). The last
/// filling keeps its rounds and an undo log of the state it changed; the restart restores the
/// state at that round and takes the ended flows' weights off. With whole weights the result is
/// bit for bit that of a full solve; other cases solve in full.
class FluidNetwork {
 public:
  /// `incremental` false always solves in full (tests compare the two).
  explicit FluidNetwork(bool incremental = true) : incremental_(incremental) {}

  using ResourceId = std::uint32_t;
  using FlowId = std::uint64_t;
  static constexpr FlowId kNoFlow = std::numeric_limits<FlowId>::max();

  /// One resource a flow crosses, and how many times its bytes count there (a copy inside one
  /// HBM reads and writes it: weight 2).
  struct Use {
    ResourceId resource;
    double weight = 1.0;
  };

  /// Adds a resource of `capacity` bytes/s (> 0). `name` is for traces and errors.
  ResourceId add_resource(std::string name, Bandwidth capacity);
  /// Changes a capacity (degrade/restore) at the current time; rates are recomputed.
  void set_capacity(ResourceId r, Bandwidth capacity);
  Bandwidth capacity(ResourceId r) const;
  const std::string& resource_name(ResourceId r) const;
  std::size_t resource_count() const;

  /// Starts a flow of `bytes` (> 0) over `path` at the current time, optionally capped. The path
  /// is copied into storage that finished flows leave behind: no allocation once warm.
  FlowId add_flow(double bytes, const std::vector<Use>& path,
                  Bandwidth cap = std::numeric_limits<Bandwidth>::infinity());
  /// Removes a flow before it completes (e.g. its link failed); returns bytes still unsent.
  double cancel_flow(FlowId f);

  /// Bytes carried by `r` up to `at` (>= now(), before the next flow event), at today's rates.
  double carried_bytes_at(ResourceId r, SimTime at) const;
  /// Moves the clock to `now` (>= current time), draining bytes at the current rates.
  void advance_to(SimTime now);
  SimTime now() const;
  /// Earliest completion time of any active flow (kNever if none).
  SimTime next_completion() const;
  /// Advances to next_completion() if it is <= `until` and returns the flows that finished then
  /// (in ascending FlowId order), removing them; otherwise advances to `until` and returns {}.
  std::vector<FlowId> complete_until(SimTime until);
  /// The same into `done` (cleared first), whose storage the caller reuses.
  void complete_until(SimTime until, std::vector<FlowId>& done);

  Bandwidth rate(FlowId f) const;
  double remaining_bytes(FlowId f) const;
  bool active(FlowId f) const;
  std::size_t active_flows() const;
  /// Sum of weight*rate over the flows crossing r (its current load, bytes/s).
  Bandwidth load(ResourceId r) const;
  /// Bytes that have crossed r so far (weighted), for utilisation statistics.
  double carried_bytes(ResourceId r) const;

  /// Solves answered by restarting the last filling (refill), for tests and benchmarks.
  std::uint64_t refills() const { return refills_; }

  static constexpr SimTime kNever = std::numeric_limits<SimTime>::max();

 private:
  /// A flow crossing a resource. Member lists stay in ascending FlowId order.
  struct Member {
    FlowId id;
    std::uint32_t slot;
    double weight;
  };
  /// A sum of rates in fixed point (units of 2^-16 B/s, each term rounded up): exact, so
  /// slackness depends only on the current flows, never on the order they came and went.
  struct Demand {
    __extension__ using Sum = unsigned __int128;
    Sum sum = 0;
    std::uint32_t huge = 0;  ///< terms too large to sum; any makes the demand exceed capacity
    void count(double rate, bool add);  ///< adds or removes the term for `rate`
    bool fits(Sum room) const { return huge == 0 && sum <= room; }
  };
  /// Flows on a resource whose ub is set by resource `key`, with the same weight ratio.
  struct Group {
    ResourceId key;
    double ratio;  ///< weight here / weight on key
    std::uint32_t count;
  };
  struct Resource {
    std::string name;
    Bandwidth capacity = 0;
    Bandwidth load = 0;   ///< sum of weight*rate since `updated`
    double carried = 0;   ///< weighted bytes up to `updated`
    SimTime updated = 0;  ///< time load was last integrated into carried
    std::vector<Member> members;
    Demand::Sum room = 0;       ///< capacity in demand units, rounded down
    Demand demand;              ///< sum over members of weight*ub
    Demand grouped;             ///< the same with each group counted once, as ratio*capacity(key)
    std::vector<Group> groups;  ///< of members whose ub is set by another resource
    std::uint32_t keyed = 0;    ///< flows whose ub this resource sets
    std::uint64_t mark = 0;     ///< solve epoch, for the component search
    std::uint32_t fractional = 0;  ///< members whose weight is not a whole number
    bool binding = false;          ///< takes part in solves
    bool dirty = false;
  };
  static constexpr std::uint32_t kNoRound = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t kTakenOff = kNoRound - 1;  ///< Fill::saved_round: by a refill
  /// Progressive-filling scratch of one resource (kept apart from Resource, for locality).
  struct Fill {
    double free_capacity = 0;
    double unfrozen_weight = 0;
    double share = 0;  ///< free_capacity / unfrozen_weight
    double load = 0;   ///< weighted rates of the flows frozen so far
    std::uint32_t unfrozen = 0;
    std::uint64_t epoch = 0;  ///< solve that set this entry up (binding resources only)
    std::uint32_t saved_round = kNoRound;  ///< last round whose undo log holds this entry
  };
  /// A round of the last filling: where its freezes and undo entries begin, and the capped list's
  /// position at its start.
  struct Round {
    std::uint32_t freezes_begin;
    std::uint32_t undo_begin;
    std::uint32_t next_cap;
  };
  /// A resource's filling state before the first freeze of a round touched it.
  struct Saved {
    ResourceId resource;
    Fill state;
  };
  struct Flow {
    FlowId id = kNoFlow;   ///< kNoFlow marks a free slot
    double remaining = 0;  ///< bytes left at `updated`
    SimTime updated = 0;
    SimTime completion = kNever;
    Bandwidth rate = 0;
    Bandwidth cap = 0;          ///< as given
    Bandwidth ub = 0;           ///< min(cap, capacity/weight over the path): a bound on the rate
    std::uint32_t ub_use = 0;   ///< index in path of the resource setting ub; path.size(): cap
    std::uint64_t version = 0;  ///< bumped on every reschedule; stale heap entries differ
    std::uint64_t mark = 0;
    std::uint32_t round = kNoRound;  ///< round of the last filling that froze it
    bool fresh = true;               ///< not yet given a rate
    Bandwidth new_rate = 0;
    std::vector<Use> path;  ///< ascending resource, no duplicates
  };
  /// A scheduled completion; the heap is a min-heap on (time, id).
  struct Event {
    SimTime time;
    FlowId id;
    std::uint32_t slot;
    std::uint64_t version;
  };
  struct EventLater;
  /// Solver scratch list: storage only grows, so pushes need no capacity check.
  template <typename T>
  struct Scratch {
    std::vector<T> items;
    std::size_t size = 0;
    void reset(std::size_t capacity) {
      if (items.size() < capacity) items.resize(capacity);
      size = 0;
    }
    void push(T x) { items[size++] = x; }
    T* begin() { return items.data(); }
    T* end() { return items.data() + size; }
  };

  std::uint32_t slot_of(FlowId f, const char* what) const;
  void check_resource(ResourceId r, const char* what) const;
  void mark_dirty(ResourceId r);
  /// A capacity in demand units, rounded down.
  static Demand::Sum room(Bandwidth capacity);
  /// Sets f.ub and f.ub_use from its cap and the current capacities.
  void bound(Flow& f) const;
  /// Adds (or removes) f's share of the demand of every resource on its path.
  void count_demand(const Flow& f, bool add);
  /// Re-derives r's binding flag; a change marks r dirty (its flows see a new constraint set).
  void update_binding(ResourceId r);
  /// Integrates r's load into carried bytes up to now.
  void integrate(Resource& r) const;
  /// Adds a flow to the solve: marks it, and stacks its unvisited binding resources.
  void gather(std::uint32_t slot, std::uint64_t epoch) const;
  /// Brings f's remaining bytes to `now` at its current rate; `finished` drains it fully.
  void drain(Flow& f, SimTime now, bool finished) const;
  /// Unlinks a flow from its resources and frees its slot.
  void retire(std::uint32_t slot);
  void solve() const;  ///< recomputes the rates of every flow in components marked dirty
  /// Restarts the last filling at the round where the first flow ended since froze; false if
  /// the history does not allow it (then solve() solves in full).
  bool refill() const;
  void fill() const;  ///< progressive filling over the component gathered by solve()
  /// Filling rounds from round `first` on, with `unfrozen` flows left and the capped list at
  /// `next_cap`; records each round for refill().
  void fill_rounds(std::uint32_t first, std::size_t unfrozen, std::size_t next_cap) const;
  /// Applies the rates of comp_flows_ and the loads of comp_resources_, and reschedules.
  void apply_rates() const;
  /// Forgets the last filling's history: the next solve is a full one.
  void drop_history() const { history_ok_ = false; }
  /// Notes a flow about to end for refill(), or drops the history if it cannot be refilled.
  void note_end(const Flow& f) const;
  /// Takes a flow's weight `w` off r's filling state (it left before this round began).
  void take_off(ResourceId r, double w) const;
  void freeze(std::uint32_t slot, double level, std::size_t& unfrozen) const;
  /// Drops stale heap entries from the top; returns the earliest valid completion time.
  SimTime peek() const;

  // Rates are solved lazily, also from const queries, hence the mutable state.
  mutable std::vector<Resource> resources_;
  mutable std::vector<Flow> flows_;  ///< slots, reused through free_slots_
  /// By slot: frozen in the filling (apart from Flow, so scans of members stay in cache).
  mutable std::vector<std::uint8_t> frozen_;
  std::vector<std::uint32_t> free_slots_;
  /// Nodes of slots_ come from here: a warm network allocates nothing per flow.
  std::pmr::unsynchronized_pool_resource node_pool_;
  /// Active flows only; lookup, never iterated.
  std::pmr::unordered_map<FlowId, std::uint32_t> slots_{&node_pool_};
  mutable std::vector<Event> heap_;
  mutable std::vector<ResourceId> dirty_resources_;
  mutable std::vector<std::uint32_t> dirty_flows_;  ///< fresh flows, not yet given a rate
  mutable Scratch<ResourceId> comp_resources_;      ///< solve scratch, reused
  mutable Scratch<std::uint32_t> comp_flows_;
  mutable std::vector<Fill> fill_;  ///< indexed by ResourceId
  mutable Scratch<ResourceId> active_resources_;
  mutable Scratch<ResourceId> saturated_;
  mutable Scratch<std::uint32_t> changed_;
  mutable Scratch<std::uint32_t> capped_;
  mutable Scratch<ResourceId> stack_;
  mutable std::uint64_t epoch_ = 0;
  // The last filling's history (refill()), and the flows ended since.
  const bool incremental_ = true;
  mutable bool history_ok_ = false;
  mutable std::vector<Round> rounds_;
  mutable std::vector<std::uint32_t> frozen_order_;  ///< slots, in the order they froze
  mutable std::vector<Saved> undo_;
  mutable std::uint32_t ended_round_ = kNoRound;  ///< earliest round an ended flow froze in
  mutable std::vector<Use> ended_uses_;           ///< their binding resources in the last filling
  /// Flows ended at earlier refills since the last full filling: rounds before `clean` were
  /// recorded while they still counted, so a refill starting there takes them off again.
  struct Gone {
    std::uint32_t uses_begin, uses_end;
    std::uint32_t clean;
  };
  mutable std::vector<Gone> gone_;
  mutable std::vector<Use> gone_uses_;
  mutable std::uint32_t round_ = 0;  ///< the filling round in progress (for freeze's log)
  mutable std::uint64_t refills_ = 0;
  SimTime now_ = 0;
  FlowId next_id_ = 0;
};

}  // namespace kvsim::model
