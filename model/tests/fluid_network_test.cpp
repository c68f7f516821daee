#include "model/fluid_network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/errors.h"
#include "model/units.h"

namespace kvsim::model {
namespace {

using Use = FluidNetwork::Use;
using FlowId = FluidNetwork::FlowId;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct RefFlow {
  std::vector<Use> path;
  double cap = kInf;
};

// Water-filling straight from the definition: raise every unfrozen flow by the largest common
// increment that keeps all resources feasible and respects caps, then freeze the flows that
// cross a saturated resource or sit at their cap; repeat.
std::vector<double> reference_rates(const std::vector<double>& capacity,
                                    const std::vector<RefFlow>& flows) {
  const std::size_t n = flows.size();
  std::vector<double> x(n, 0.0);
  std::vector<bool> frozen(n, false);
  auto used = [&](std::size_t r) {
    double sum = 0;
    for (std::size_t f = 0; f < n; ++f) {
      for (const Use& u : flows[f].path) {
        if (u.resource == r) sum += u.weight * x[f];
      }
    }
    return sum;
  };
  while (std::find(frozen.begin(), frozen.end(), false) != frozen.end()) {
    double delta = kInf;
    for (std::size_t r = 0; r < capacity.size(); ++r) {
      double grow = 0;
      for (std::size_t f = 0; f < n; ++f) {
        if (frozen[f]) continue;
        for (const Use& u : flows[f].path) {
          if (u.resource == r) grow += u.weight;
        }
      }
      if (grow > 0) delta = std::min(delta, (capacity[r] - used(r)) / grow);
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) delta = std::min(delta, flows[f].cap - x[f]);
    }
    delta = std::max(delta, 0.0);
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) x[f] += delta;
    }
    for (std::size_t r = 0; r < capacity.size(); ++r) {
      if (used(r) < capacity[r] * (1 - 1e-9)) continue;
      for (std::size_t f = 0; f < n; ++f) {
        for (const Use& u : flows[f].path) {
          if (u.resource == r) frozen[f] = true;
        }
      }
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (x[f] >= flows[f].cap * (1 - 1e-9)) frozen[f] = true;
    }
  }
  return x;
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(b), 1.0);
}

// Feasibility plus the max-min property: each flow is at its cap, or crosses a saturated
// resource on which no flow runs faster.
void expect_max_min(const FluidNetwork& net, const std::vector<FlowId>& ids,
                    const std::vector<RefFlow>& flows) {
  const std::size_t nres = net.resource_count();
  std::vector<double> load(nres, 0.0);
  std::vector<double> fastest(nres, 0.0);
  for (std::size_t f = 0; f < ids.size(); ++f) {
    for (const Use& u : flows[f].path) {
      load[u.resource] += u.weight * net.rate(ids[f]);
      fastest[u.resource] = std::max(fastest[u.resource], net.rate(ids[f]));
    }
  }
  for (FluidNetwork::ResourceId r = 0; r < nres; ++r) {
    EXPECT_LE(load[r], net.capacity(r) * (1 + 1e-9)) << "resource " << r;
    EXPECT_TRUE(close(load[r], net.load(r))) << "resource " << r;
  }
  for (std::size_t f = 0; f < ids.size(); ++f) {
    const double x = net.rate(ids[f]);
    bool bottlenecked = x >= flows[f].cap * (1 - 1e-9);
    for (const Use& u : flows[f].path) {
      const bool saturated = load[u.resource] >= net.capacity(u.resource) * (1 - 1e-9);
      if (saturated && x >= fastest[u.resource] * (1 - 1e-9)) bottlenecked = true;
    }
    EXPECT_TRUE(bottlenecked) << "flow " << f << " at " << x << " could grow";
  }
}

TEST(FluidNetworkTest, IdleSingleFlowTakesExactTransferTime) {
  for (const double capacity : {7e6, 1e9, 12.5e9, 56e9, 3.2e12}) {
    for (const double bytes : {1.0, 4096.0, 123457.0, 1e6, 1073741824.0, 7.5e9}) {
      FluidNetwork net;
      const auto slow = net.add_resource("slow", capacity);
      const auto fast = net.add_resource("fast", capacity * 3);
      const auto mid = net.add_resource("mid", capacity * 1.5);
      const SimTime t0 = 12345;
      net.advance_to(t0);
      const FlowId f = net.add_flow(bytes, {{fast}, {slow}, {mid}});
      const SimTime expected = t0 + transfer_time(bytes, capacity);
      EXPECT_EQ(net.rate(f), capacity);
      EXPECT_EQ(net.next_completion(), expected) << bytes << " B at " << capacity;
      EXPECT_EQ(net.complete_until(expected - 1), std::vector<FlowId>{});
      EXPECT_EQ(net.now(), expected - 1);
      EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{f});
      EXPECT_EQ(net.now(), expected);
      EXPECT_FALSE(net.active(f));
      EXPECT_EQ(net.next_completion(), FluidNetwork::kNever);
    }
  }
}

TEST(FluidNetworkTest, EqualFlowsFinishTogetherAtKTimesSingleTime) {
  for (const double capacity : {1e9, 56e9, 3e12}) {
    for (const double bytes : {1e6, 1048576.0, 333333.0}) {
      const SimTime single = transfer_time(bytes, capacity);
      for (int k = 1; k <= 16; ++k) {
        FluidNetwork net;
        const auto link = net.add_resource("link", capacity);
        const auto port = net.add_resource("port", capacity * 2);
        const SimTime t0 = 1000;
        net.advance_to(t0);
        std::vector<FlowId> ids;
        for (int i = 0; i < k; ++i) ids.push_back(net.add_flow(bytes, {{port}, {link}}));
        const SimTime expected = t0 + transfer_time(bytes, capacity / k);
        EXPECT_EQ(net.complete_until(FluidNetwork::kNever), ids) << "k=" << k;
        EXPECT_EQ(net.now(), expected);
        const double ideal = bytes / capacity * static_cast<double>(kSec) * k;
        EXPECT_LE(std::abs(static_cast<double>(expected - t0) - ideal), 1.0)
            << "k=" << k << " bytes=" << bytes << " capacity=" << capacity;
        if (std::floor(ideal / k) == ideal / k) {  // integral single time: exactly k times it
          EXPECT_EQ(expected - t0, single * static_cast<SimTime>(k));
        }
        EXPECT_EQ(net.active_flows(), 0u);
      }
    }
  }
}

TEST(FluidNetworkTest, TextbookMaxMinDiffersFromEqualSplit) {
  const std::vector<double> capacity = {10e9, 4e9};
  const std::vector<RefFlow> flows = {{{{0}}}, {{{0}, {1}}}, {{{1}}}};
  FluidNetwork net;
  net.add_resource("L1", capacity[0]);
  net.add_resource("L2", capacity[1]);
  std::vector<FlowId> ids;
  for (const RefFlow& f : flows) ids.push_back(net.add_flow(1e9, f.path));
  const std::vector<double> expected = reference_rates(capacity, flows);
  for (std::size_t f = 0; f < ids.size(); ++f) {
    EXPECT_TRUE(close(net.rate(ids[f]), expected[f])) << f << ": " << net.rate(ids[f]);
  }
  EXPECT_GT(net.rate(ids[0]), net.rate(ids[1]) * 1.5);  // not an equal split on L1
  EXPECT_TRUE(close(net.load(0), capacity[0]));
  EXPECT_TRUE(close(net.load(1), capacity[1]));
  expect_max_min(net, ids, flows);
}

TEST(FluidNetworkTest, WeightedUseCountsTwice) {
  const std::vector<double> capacity = {10e9, 4e9};
  const std::vector<RefFlow> flows = {{{{0}}}, {{{0}, {1, 2.0}}}, {{{1}}}};
  FluidNetwork net;
  net.add_resource("L1", capacity[0]);
  net.add_resource("L2", capacity[1]);
  std::vector<FlowId> ids;
  for (const RefFlow& f : flows) ids.push_back(net.add_flow(1e9, f.path));
  const std::vector<double> expected = reference_rates(capacity, flows);
  for (std::size_t f = 0; f < ids.size(); ++f) {
    EXPECT_TRUE(close(net.rate(ids[f]), expected[f])) << f;
  }
  EXPECT_TRUE(close(net.rate(ids[1]), 4e9 / 3));
  expect_max_min(net, ids, flows);
}

TEST(FluidNetworkTest, RepeatedResourceInPathMergesWeights) {
  FluidNetwork net;
  const auto hbm = net.add_resource("hbm", 8e9);
  const FlowId f = net.add_flow(1e6, {{hbm}, {hbm}});
  EXPECT_EQ(net.rate(f), 4e9);
  EXPECT_EQ(net.load(hbm), 8e9);
}

TEST(FluidNetworkTest, RandomTopologiesMatchReference) {
  std::mt19937_64 rng(20240611);
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
  };
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 400; ++round) {
    FluidNetwork net;
    std::vector<double> capacity(1 + pick(7));
    for (std::size_t r = 0; r < capacity.size(); ++r) {
      capacity[r] = uniform(1e9, 100e9);
      net.add_resource("r" + std::to_string(r), capacity[r]);
    }
    auto random_flow = [&]() {
      RefFlow f;
      const std::size_t len = pick(4);
      for (std::size_t i = 0; i < len; ++i) {
        const std::size_t kind = pick(4);
        const double weight = kind < 2 ? 1.0 : kind == 2 ? 2.0 : uniform(0.5, 3.0);
        f.path.push_back({static_cast<FluidNetwork::ResourceId>(pick(capacity.size())), weight});
      }
      if (f.path.empty() || pick(10) < 3) f.cap = uniform(0.5e9, 50e9);
      return f;
    };
    std::vector<RefFlow> flows;
    std::vector<FlowId> ids;
    auto check = [&](const char* phase) {
      SCOPED_TRACE(std::string(phase) + " round " + std::to_string(round));
      const std::vector<double> expected = reference_rates(capacity, flows);
      for (std::size_t f = 0; f < ids.size(); ++f) {
        EXPECT_TRUE(close(net.rate(ids[f]), expected[f]))
            << "flow " << f << ": " << net.rate(ids[f]) << " vs " << expected[f];
      }
      expect_max_min(net, ids, flows);
    };
    const std::size_t n = 1 + pick(12);
    for (std::size_t i = 0; i < n; ++i) {
      flows.push_back(random_flow());
      ids.push_back(net.add_flow(1e12, flows.back().path, flows.back().cap));
    }
    check("initial");
    // Incremental re-solves: cancel some flows, add others, change a capacity.
    net.advance_to(1000);
    for (std::size_t i = ids.size(); i-- > 0;) {
      if (pick(3) != 0) continue;
      net.cancel_flow(ids[i]);
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(i));
      flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (std::size_t i = pick(4); i > 0; --i) {
      flows.push_back(random_flow());
      ids.push_back(net.add_flow(1e12, flows.back().path, flows.back().cap));
    }
    const std::size_t r = pick(capacity.size());
    capacity[r] = uniform(1e9, 100e9);
    net.set_capacity(static_cast<FluidNetwork::ResourceId>(r), capacity[r]);
    check("after changes");
  }
}

// Event-driven comparison with the reference over random traffic where fast shared resources
// (HBM- and DMA-like) sit on most paths, sized so they turn slack and binding as flows come, go and
// finish and as capacities change. After every operation all rates, loads, carried bytes and
// remaining bytes must match the reference.
TEST(FluidNetworkTest, RandomTrafficOverFastSharedResourcesMatchesReference) {
  std::mt19937_64 rng(20240612);
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
  };
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 300; ++round) {
    FluidNetwork net;
    const std::size_t links = 1 + pick(5);
    const std::size_t nres = links + 1 + pick(3);
    std::vector<double> capacity(nres);
    // A fast resource near the bounds of a few link flows flips as they come and go; a very fast
    // one (a 1.6 TB/s HBM port) stays slack; one in between flips with set_capacity.
    auto fast_capacity = [&] {
      const std::size_t kind = pick(3);
      return kind == 0 ? uniform(1, 4) * 25e9 : kind == 1 ? 1.6e12 : uniform(20e9, 200e9);
    };
    for (std::size_t r = 0; r < nres; ++r) {
      capacity[r] = r < links ? uniform(1e9, 50e9) : fast_capacity();
      net.add_resource("r" + std::to_string(r), capacity[r]);
    }
    auto weight = [&] {
      const std::size_t kind = pick(8);
      return kind < 5 ? 1.0 : kind < 7 ? 2.0 : uniform(0.5, 3.0);
    };
    auto random_flow = [&] {
      RefFlow f;
      if (pick(10) != 0) {
        for (std::size_t i = 0, n = 1 + (pick(5) == 0); i < n; ++i) {
          f.path.push_back({static_cast<FluidNetwork::ResourceId>(pick(links)), weight()});
        }
      }
      for (std::size_t i = 0, n = pick(10) == 0 ? 0 : 1 + pick(2); i < n; ++i) {
        f.path.push_back(
            {static_cast<FluidNetwork::ResourceId>(links + pick(nres - links)), weight()});
      }
      if (f.path.empty() || pick(7) == 0) f.cap = uniform(0.5e9, 30e9);
      return f;
    };
    struct Live {
      FlowId id;
      RefFlow flow;
      double bytes;
      double left;  // reference remaining bytes
    };
    std::vector<Live> live;
    std::vector<double> done_carried(nres, 0.0);  // by flows already finished or cancelled
    std::vector<double> rates;                    // reference rates of `live`
    auto settle = [&](const Live& l, double sent) {
      for (const Use& u : l.flow.path) done_carried[u.resource] += u.weight * sent;
    };
    for (int step = 0; step < 60; ++step) {
      const std::size_t op = pick(20);
      std::string what;
      if (op < 8 && live.size() < 14) {
        const RefFlow f = random_flow();
        const double bytes = uniform(1e5, 5e7);
        live.push_back({net.add_flow(bytes, f.path, f.cap), f, bytes, bytes});
        what = "add";
      } else if (op < 10 && !live.empty()) {
        const std::size_t i = pick(live.size());
        const double left = net.cancel_flow(live[i].id);
        EXPECT_NEAR(left, std::max(0.0, live[i].left), 1e-6 * live[i].bytes);
        settle(live[i], live[i].bytes - live[i].left);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        what = "cancel";
      } else if (op < 17) {
        const SimTime start = net.now();
        const SimTime until = pick(3) == 0 ? FluidNetwork::kNever : start + pick(2000) * kUs;
        const std::vector<FlowId> done = net.complete_until(until);
        const double dt = static_cast<double>(net.now() - start) / static_cast<double>(kSec);
        for (std::size_t i = 0; i < live.size(); ++i) live[i].left -= rates[i] * dt;
        for (const FlowId id : done) {
          const auto it =
              std::find_if(live.begin(), live.end(), [&](const Live& l) { return l.id == id; });
          ASSERT_NE(it, live.end());
          // Finish times round up to the picosecond: a fast flow may overshoot by a few bytes.
          const auto i = it - live.begin();
          EXPECT_NEAR(it->left, 0.0, 1e-6 * it->bytes + rates[static_cast<std::size_t>(i)] * 1e-12)
              << "flow " << id << " finished off time";
          settle(*it, it->bytes);
          live.erase(it);
          rates.erase(rates.begin() + i);
        }
        what = "advance to " + std::to_string(net.now());
      } else {
        const std::size_t r = pick(nres);
        capacity[r] = r < links ? uniform(1e9, 50e9) : fast_capacity();
        net.set_capacity(static_cast<FluidNetwork::ResourceId>(r), capacity[r]);
        what = "set_capacity r" + std::to_string(r);
      }
      SCOPED_TRACE("round " + std::to_string(round) + " step " + std::to_string(step) + " " + what);
      std::vector<RefFlow> flows;
      std::vector<FlowId> ids;
      for (const Live& l : live) {
        flows.push_back(l.flow);
        ids.push_back(l.id);
      }
      rates = reference_rates(capacity, flows);
      std::vector<double> load(nres, 0.0);
      std::vector<double> carried = done_carried;
      for (std::size_t i = 0; i < live.size(); ++i) {
        const double x = net.rate(live[i].id);
        EXPECT_TRUE(close(x, rates[i])) << "flow " << live[i].id << ": " << x << " vs " << rates[i];
        EXPECT_NEAR(net.remaining_bytes(live[i].id), std::max(0.0, live[i].left),
                    1e-6 * live[i].bytes);
        for (const Use& u : live[i].flow.path) {
          load[u.resource] += u.weight * rates[i];
          carried[u.resource] += u.weight * (live[i].bytes - live[i].left);
        }
      }
      for (FluidNetwork::ResourceId r = 0; r < nres; ++r) {
        EXPECT_NEAR(net.load(r), load[r], 1e-9 * std::max(load[r], capacity[r])) << "r" << r;
        EXPECT_NEAR(net.carried_bytes(r), carried[r], 1e-6 * std::max(carried[r], 1e6)) << "r" << r;
      }
      expect_max_min(net, ids, flows);
      if (testing::Test::HasFailure()) return;  // one failing step is enough to read
    }
  }
}

// A resource whose flows' bounds sum to exactly its capacity is slack; had it been solved it would
// saturate at those very rates. Rates, loads and finish times are exact either way, and a capacity
// one ulp lower (binding) gives the same rates.
TEST(FluidNetworkTest, ExactlySaturatedResourceGivesSolvedRates) {
  for (const double hbm_capacity : {8e10, std::nextafter(8e10, 0.0)}) {
    SCOPED_TRACE(hbm_capacity);
    const bool exact = hbm_capacity == 8e10;
    // Four flows over their own 20 GB/s link into one HBM port, or two copying inside it (weight
    // 2): demand 8e10 either way.
    for (const double hbm_weight : {1.0, 2.0}) {
      FluidNetwork net;
      const auto hbm = net.add_resource("hbm", hbm_capacity);
      std::vector<FlowId> ids;
      for (int i = 0; i < 4 / hbm_weight; ++i) {
        const auto link = net.add_resource("link", 2e10);
        ids.push_back(net.add_flow(1e6, {{hbm, hbm_weight}, {link}}));
      }
      for (const FlowId f : ids) {
        if (exact) {
          EXPECT_EQ(net.rate(f), 2e10);
        }
        EXPECT_TRUE(close(net.rate(f), 2e10)) << net.rate(f);
      }
      EXPECT_TRUE(close(net.load(hbm), hbm_capacity));
      if (exact) {
        EXPECT_EQ(net.load(hbm), 8e10);
      }
      const SimTime end = transfer_time(1e6, 2e10);
      const SimTime t = net.next_completion();
      if (exact) {
        EXPECT_EQ(t, end);
      }
      EXPECT_TRUE(t + 1 >= end && t <= end + 1) << t << " vs " << end;
      EXPECT_EQ(net.complete_until(FluidNetwork::kNever), ids);
      EXPECT_TRUE(close(net.carried_bytes(hbm), 4e6));
    }
    // Capped flows filling a link exactly; a fifth makes it binding, cancelling it slack again.
    FluidNetwork net;
    const auto link = net.add_resource("link", hbm_capacity / 80);
    std::vector<FlowId> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(net.add_flow(1e6, {{link}}, 2.5e8));
    for (const FlowId f : ids) EXPECT_TRUE(close(net.rate(f), 2.5e8));
    const FlowId extra = net.add_flow(1e6, {{link}}, 2.5e8);
    EXPECT_TRUE(close(net.rate(extra), hbm_capacity / 400));
    EXPECT_TRUE(close(net.rate(ids[0]), hbm_capacity / 400));
    net.advance_to(1 * kUs);
    net.cancel_flow(extra);
    for (const FlowId f : ids) EXPECT_TRUE(close(net.rate(f), 2.5e8));
    EXPECT_TRUE(close(net.load(link), 1e9));
  }
}

// An HBM port shared by more flows than it could carry at their bounds, but bottlenecked on two
// links whose capacities fit it, is slack; it turns binding when a link grows past its room and
// slack again when the link shrinks.
TEST(FluidNetworkTest, PortSlackByLinkBottlenecksTurnsBindingWhenALinkGrows) {
  std::vector<double> capacity = {1e11, 2e10, 2e10};
  FluidNetwork net;
  for (const double c : capacity) net.add_resource("r", c);
  std::vector<RefFlow> flows;
  std::vector<FlowId> ids;
  for (int i = 0; i < 10; ++i) {
    flows.push_back({{{0}, {static_cast<FluidNetwork::ResourceId>(1 + i % 2)}}});
    ids.push_back(net.add_flow(1e9, flows.back().path));
  }
  auto check = [&](double expected_a, double expected_b) {
    const std::vector<double> expected = reference_rates(capacity, flows);
    for (std::size_t f = 0; f < ids.size(); ++f) {
      EXPECT_TRUE(close(net.rate(ids[f]), expected[f])) << f << ": " << net.rate(ids[f]);
      EXPECT_TRUE(close(net.rate(ids[f]), f % 2 == 0 ? expected_a : expected_b));
    }
    expect_max_min(net, ids, flows);
  };
  check(4e9, 4e9);
  capacity[1] = 9e10;  // the port now binds: 4e9 for b's flows, (1e11 - 2e10) / 5 for a's
  net.set_capacity(1, capacity[1]);
  check(1.6e10, 4e9);
  net.advance_to(1 * kUs);
  capacity[1] = 3e10;
  net.set_capacity(1, capacity[1]);
  check(6e9, 4e9);
  EXPECT_TRUE(close(net.load(0), 5e10));
}

// Resources crossed by the same flows bound each other: neither may be dropped because the other
// would hold the flows back.
TEST(FluidNetworkTest, ResourcesBoundingEachOtherStayBinding) {
  const std::vector<double> capacity = {1e9, 1e9};
  const std::vector<RefFlow> flows = {
      {{{0, 1.0}, {1, 0.5}}}, {{{0, 0.5}, {1, 1.0}}}, {{{0}, {1}}}, {{{0, 1.0}, {1, 0.5}}}};
  FluidNetwork net;
  net.add_resource("a", capacity[0]);
  net.add_resource("b", capacity[1]);
  std::vector<FlowId> ids;
  for (const RefFlow& f : flows) ids.push_back(net.add_flow(1e9, f.path));
  const std::vector<double> expected = reference_rates(capacity, flows);
  for (std::size_t f = 0; f < ids.size(); ++f) {
    EXPECT_TRUE(close(net.rate(ids[f]), expected[f])) << f << ": " << net.rate(ids[f]);
  }
  expect_max_min(net, ids, flows);
}

TEST(FluidNetworkTest, StaggeredArrivalSharesFromJoinTime) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 1e9);
  const FlowId a = net.add_flow(1e6, {{link}});  // alone: 1 ms
  EXPECT_EQ(net.next_completion(), 1 * kMs);
  net.advance_to(500 * kUs);
  EXPECT_EQ(net.remaining_bytes(a), 5e5);
  const FlowId b = net.add_flow(1e6, {{link}});
  EXPECT_EQ(net.rate(a), 5e8);
  EXPECT_EQ(net.rate(b), 5e8);
  // a: 5e5 B left at 0.5 GB/s -> 1 ms more; b then has 5e5 B left alone at 1 GB/s -> 0.5 ms.
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{a});
  EXPECT_EQ(net.now(), 1500 * kUs);
  EXPECT_EQ(net.remaining_bytes(b), 5e5);
  EXPECT_EQ(net.rate(b), 1e9);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{b});
  EXPECT_EQ(net.now(), 2 * kMs);
}

TEST(FluidNetworkTest, SetCapacityMidFlight) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 1e9);
  const FlowId f = net.add_flow(1e6, {{link}});
  net.advance_to(250 * kUs);
  net.set_capacity(link, 5e8);  // 7.5e5 B left at 0.5 GB/s -> 1.5 ms more
  EXPECT_EQ(net.capacity(link), 5e8);
  EXPECT_EQ(net.rate(f), 5e8);
  EXPECT_EQ(net.next_completion(), 1750 * kUs);
  net.advance_to(1250 * kUs);
  net.set_capacity(link, 1e9);  // 2.5e5 B left at 1 GB/s -> 0.25 ms more
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{f});
  EXPECT_EQ(net.now(), 1500 * kUs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(link), 1e6);
}

TEST(FluidNetworkTest, CancelReturnsResidueAndSpeedsUpOthers) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 1e9);
  const FlowId a = net.add_flow(1e6, {{link}});
  const FlowId b = net.add_flow(1e6, {{link}});
  net.advance_to(400 * kUs);  // each sent 2e5 B
  EXPECT_EQ(net.cancel_flow(a), 8e5);
  EXPECT_FALSE(net.active(a));
  EXPECT_EQ(net.rate(b), 1e9);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{b});
  EXPECT_EQ(net.now(), 1200 * kUs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(link), 2e5 + 1e6);
  // A flow cancelled at the instant it was added has sent nothing.
  const FlowId c = net.add_flow(4096, {{link}});
  EXPECT_EQ(net.cancel_flow(c), 4096);
  EXPECT_EQ(net.next_completion(), FluidNetwork::kNever);
  EXPECT_EQ(net.load(link), 0);
}

TEST(FluidNetworkTest, FlowJoiningAtAnotherFlowsCompletionInstant) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 1e9);
  const FlowId a = net.add_flow(1e6, {{link}});
  net.advance_to(1 * kMs);  // a is done now but not yet collected
  EXPECT_EQ(net.remaining_bytes(a), 0);
  const FlowId b = net.add_flow(1e6, {{link}});
  EXPECT_EQ(net.next_completion(), 1 * kMs);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{a});
  EXPECT_EQ(net.now(), 1 * kMs);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{b});
  EXPECT_EQ(net.now(), 2 * kMs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(link), 2e6);
}

TEST(FluidNetworkTest, CompleteUntilWithNothingPending) {
  FluidNetwork net;
  net.add_resource("link", 1e9);
  EXPECT_EQ(net.complete_until(5000), std::vector<FlowId>{});
  EXPECT_EQ(net.now(), 5000u);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{});
  EXPECT_EQ(net.now(), 5000u);  // kNever is "no bound": the clock stays
}

TEST(FluidNetworkTest, CappedFlowsAndEmptyPaths) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 10e9);
  const FlowId capped = net.add_flow(1e6, {{link}}, 2e9);
  const FlowId other = net.add_flow(1e6, {{link}});
  const FlowId delay = net.add_flow(1e6, {}, 1e9);  // no resource: runs at its cap
  EXPECT_EQ(net.rate(capped), 2e9);
  EXPECT_EQ(net.rate(other), 8e9);
  EXPECT_EQ(net.rate(delay), 1e9);
  EXPECT_EQ(net.next_completion(), transfer_time(1e6, 8e9));
  net.complete_until(FluidNetwork::kNever);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{capped});
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{delay});
  EXPECT_EQ(net.now(), transfer_time(1e6, 1e9));
}

TEST(FluidNetworkTest, LoadAndCarriedBytes) {
  FluidNetwork net;
  const auto hbm = net.add_resource("hbm", 1e9);
  const auto dma = net.add_resource("dma", 4e9);
  const FlowId f = net.add_flow(1e6, {{hbm, 2.0}, {dma}});  // 0.5 GB/s
  EXPECT_EQ(net.load(hbm), 1e9);
  EXPECT_EQ(net.load(dma), 5e8);
  net.advance_to(1 * kMs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(hbm), 1e6);
  EXPECT_DOUBLE_EQ(net.carried_bytes(dma), 5e5);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{f});
  EXPECT_EQ(net.now(), 2 * kMs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(hbm), 2e6);
  EXPECT_DOUBLE_EQ(net.carried_bytes(dma), 1e6);
  EXPECT_EQ(net.load(hbm), 0);
  net.advance_to(5 * kMs);
  EXPECT_DOUBLE_EQ(net.carried_bytes(hbm), 2e6);
}

TEST(FluidNetworkTest, CarriedBytesTotalsOverRandomTraffic) {
  std::mt19937_64 rng(7);
  FluidNetwork net;
  const std::size_t nres = 12;
  for (std::size_t r = 0; r < nres; ++r) {
    net.add_resource("r" + std::to_string(r), 1e9 * static_cast<double>(1 + rng() % 50));
  }
  std::vector<double> expected(nres, 0.0);
  for (int i = 0; i < 500; ++i) {
    std::vector<Use> path;
    for (std::size_t j = 0, len = 1 + rng() % 4; j < len; ++j) {
      path.push_back({static_cast<FluidNetwork::ResourceId>(rng() % nres),
                      1.0 + static_cast<double>(rng() % 2)});
    }
    const double bytes = static_cast<double>(1 + rng() % 10000000);
    for (const Use& u : path) expected[u.resource] += u.weight * bytes;
    net.add_flow(bytes, path);
    if (i % 7 == 0) net.complete_until(net.now() + 10 * kUs);
  }
  while (net.active_flows() > 0) net.complete_until(FluidNetwork::kNever);
  for (FluidNetwork::ResourceId r = 0; r < nres; ++r) {
    EXPECT_NEAR(net.carried_bytes(r), expected[r], expected[r] * 1e-12) << r;
  }
}

TEST(FluidNetworkTest, DisjointComponentsKeepTheirSchedule) {
  FluidNetwork net;
  const auto a = net.add_resource("a", 1e9);
  const auto b = net.add_resource("b", 2e9);
  const FlowId fa = net.add_flow(1e6, {{a}});
  const FlowId fb = net.add_flow(3e6, {{b}});
  net.advance_to(100 * kUs);
  net.add_flow(1e6, {{a}});
  EXPECT_EQ(net.rate(fb), 2e9);
  EXPECT_EQ(net.rate(fa), 5e8);
  // fa: 9e5 B left at 0.5 GB/s -> 1.8 ms more; fb still ends at 1.5 ms.
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{fb});
  EXPECT_EQ(net.now(), 1500 * kUs);
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{fa});
  EXPECT_EQ(net.now(), 1900 * kUs);
}

TEST(FluidNetworkTest, ThousandsOfFlowsRunToCompletion) {
  FluidNetwork net;
  const std::size_t nres = 64;
  for (std::size_t r = 0; r < nres; ++r) net.add_resource("r" + std::to_string(r), 50e9);
  std::mt19937_64 rng(99);
  for (int i = 0; i < 4096; ++i) {
    std::vector<Use> path;
    for (int j = 0; j < 5; ++j)
      path.push_back({static_cast<FluidNetwork::ResourceId>(rng() % nres)});
    net.add_flow(static_cast<double>(1 + rng() % 1000000), path);
  }
  EXPECT_EQ(net.active_flows(), 4096u);
  std::size_t done = 0;
  SimTime last = 0;
  while (net.active_flows() > 0) {
    const std::vector<FlowId> ids = net.complete_until(FluidNetwork::kNever);
    ASSERT_FALSE(ids.empty());
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_GE(net.now(), last);
    last = net.now();
    done += ids.size();
  }
  EXPECT_EQ(done, 4096u);
}

// Drives a random sequence of every operation and logs what it observes.
std::vector<double> random_run(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  FluidNetwork net;
  for (int r = 0; r < 10; ++r) net.add_resource("r", 1e9 * static_cast<double>(1 + rng() % 20));
  std::vector<FlowId> live;
  std::vector<double> log;
  for (int step = 0; step < 2000; ++step) {
    const auto op = rng() % 10;
    if (op < 4) {
      std::vector<Use> path;
      for (std::size_t j = 0, len = rng() % 4; j < len; ++j) {
        path.push_back({static_cast<FluidNetwork::ResourceId>(rng() % 10),
                        0.5 + static_cast<double>(rng() % 4)});
      }
      const double cap =
          path.empty() || rng() % 4 == 0 ? 1e8 * static_cast<double>(1 + rng() % 100) : kInf;
      live.push_back(net.add_flow(static_cast<double>(1 + rng() % 5000000), path, cap));
    } else if (op < 5 && !live.empty()) {
      const std::size_t i = rng() % live.size();
      if (net.active(live[i])) log.push_back(net.cancel_flow(live[i]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 6) {
      net.set_capacity(static_cast<FluidNetwork::ResourceId>(rng() % 10),
                       1e9 * static_cast<double>(1 + rng() % 20));
    } else {
      for (const FlowId f : net.complete_until(net.now() + (rng() % 200) * kUs)) {
        log.push_back(static_cast<double>(f));
      }
      log.push_back(static_cast<double>(net.now()));
    }
  }
  for (FluidNetwork::ResourceId r = 0; r < 10; ++r) log.push_back(net.carried_bytes(r));
  return log;
}

TEST(FluidNetworkTest, SameSequenceGivesIdenticalResults) {
  const std::vector<double> first = random_run(5);
  const std::vector<double> second = random_run(5);
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], second[i]) << i;
}

// Restarting the last filling after flows end (refill) must give exactly what a full solve gives:
// the same rates, bit for bit, and so the same completions. Long runs of ends (with adds,
// cancels and capacity changes between them) on many shared resources, whole weights (refills)
// and fractional ones (full solves).
void expect_refill_matches_full_solve(std::uint64_t seed, bool whole_weights) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
  };
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  FluidNetwork inc;
  FluidNetwork full(false);
  const std::size_t nres = 12;
  for (std::size_t r = 0; r < nres; ++r) {
    const double c = uniform(1e9, 20e9);
    inc.add_resource("r" + std::to_string(r), c);
    full.add_resource("r" + std::to_string(r), c);
  }
  std::vector<std::pair<FlowId, FlowId>> ids;
  auto add = [&] {
    std::vector<Use> path;
    for (std::size_t i = 1 + pick(4); i > 0; --i) {
      const double w = whole_weights ? static_cast<double>(1 + pick(2)) : uniform(0.5, 2.5);
      path.push_back({static_cast<FluidNetwork::ResourceId>(pick(nres)), w});
    }
    const double cap = pick(5) == 0 ? uniform(0.2e9, 5e9) : kInf;
    const double bytes = uniform(1e6, 1e9);
    ids.emplace_back(inc.add_flow(bytes, path, cap), full.add_flow(bytes, path, cap));
  };
  for (int i = 0; i < 60; ++i) add();
  std::vector<FlowId> done_inc, done_full;
  for (int step = 0; step < 400 && !ids.empty(); ++step) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " step " + std::to_string(step));
    ASSERT_EQ(inc.next_completion(), full.next_completion());
    for (const auto& [a, b] : ids) {
      ASSERT_EQ(inc.rate(a), full.rate(b));
      ASSERT_EQ(inc.remaining_bytes(a), full.remaining_bytes(b));
    }
    const std::size_t what = pick(20);
    if (what == 0) {
      add();
    } else if (what == 1) {
      const std::size_t i = pick(ids.size());
      ASSERT_EQ(inc.cancel_flow(ids[i].first), full.cancel_flow(ids[i].second));
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (what == 2) {
      const auto r = static_cast<FluidNetwork::ResourceId>(pick(nres));
      const double c = uniform(1e9, 20e9);
      inc.set_capacity(r, c);
      full.set_capacity(r, c);
    } else {
      const SimTime t = inc.next_completion();
      inc.complete_until(t, done_inc);
      full.complete_until(t, done_full);
      ASSERT_EQ(done_inc.size(), done_full.size());
      for (std::size_t k = 0; k < done_inc.size(); ++k) {
        const auto it = std::find_if(ids.begin(), ids.end(),
                                     [&](const auto& p) { return p.first == done_inc[k]; });
        ASSERT_NE(it, ids.end());
        ASSERT_EQ(it->second, done_full[k]);
        ids.erase(it);
      }
    }
  }
  EXPECT_EQ(full.refills(), 0u);
  if (whole_weights) {
    EXPECT_GT(inc.refills(), 20u) << "the runs of ends were not refilled";
  } else {
    EXPECT_EQ(inc.refills(), 0u) << "fractional weights must solve in full";
  }
}

TEST(FluidNetworkTest, RefillAfterEndsMatchesAFullSolveBitForBit) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) expect_refill_matches_full_solve(seed, true);
}

TEST(FluidNetworkTest, FractionalWeightsSolveInFullAndStillMatch) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) expect_refill_matches_full_solve(seed, false);
}

template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(FluidNetworkTest, ErrorsLeaveStateUnchanged) {
  FluidNetwork net;
  const auto link = net.add_resource("link", 1e9);
  const FlowId f = net.add_flow(1e6, {{link}});
  net.advance_to(100 * kUs);
  const SimTime next = net.next_completion();
  const auto unchanged = [&] {
    EXPECT_EQ(net.resource_count(), 1u);
    EXPECT_EQ(net.capacity(link), 1e9);
    EXPECT_EQ(net.active_flows(), 1u);
    EXPECT_EQ(net.rate(f), 1e9);
    EXPECT_EQ(net.now(), 100 * kUs);
    EXPECT_EQ(net.next_completion(), next);
    EXPECT_EQ(net.load(link), 1e9);
  };
  using EK = ErrorKind;
  expect_error([&] { net.add_resource("bad", 0); }, EK::kInvalidArgument, "capacity");
  expect_error([&] { net.add_resource("bad", kInf); }, EK::kInvalidArgument, "capacity");
  expect_error([&] { net.add_resource("bad", std::nan("")); }, EK::kInvalidArgument, "capacity");
  expect_error([&] { net.set_capacity(7, 1e9); }, EK::kOutOfRange,
               "set_capacity: unknown resource 7");
  expect_error([&] { net.set_capacity(link, -1); }, EK::kInvalidArgument, "set_capacity");
  expect_error([&] { net.capacity(3); }, EK::kOutOfRange, "capacity: unknown resource 3");
  expect_error([&] { net.resource_name(3); }, EK::kOutOfRange, "resource_name");
  expect_error([&] { net.add_flow(0, {{link}}); }, EK::kInvalidArgument,
               "add_flow: bytes must be finite and > 0, got 0");
  expect_error([&] { net.add_flow(kInf, {{link}}); }, EK::kInvalidArgument, "bytes");
  expect_error(
      [&] {
        net.add_flow(10, {{link}, {9}});
      },
      EK::kOutOfRange, "add_flow: path[1] names unknown resource 9");
  expect_error([&] { net.add_flow(10, {{link, 0.0}}); }, EK::kInvalidArgument, "path[0].weight");
  expect_error([&] { net.add_flow(10, {{link}}, 0); }, EK::kInvalidArgument, "cap");
  expect_error([&] { net.add_flow(10, {}); }, EK::kInvalidArgument, "path is empty");
  expect_error([&] { net.cancel_flow(42); }, EK::kOutOfRange, "cancel_flow: unknown");
  expect_error([&] { net.rate(42); }, EK::kOutOfRange, "rate: unknown");
  expect_error([&] { net.remaining_bytes(42); }, EK::kOutOfRange, "remaining_bytes");
  expect_error([&] { net.load(5); }, EK::kOutOfRange, "load: unknown resource 5");
  expect_error([&] { net.carried_bytes(5); }, EK::kOutOfRange, "carried_bytes");
  expect_error([&] { net.advance_to(50 * kUs); }, EK::kInvalidArgument, "advance_to");
  expect_error([&] { net.advance_to(next + 1); }, EK::kInvalidArgument, "next completion");
  expect_error([&] { net.complete_until(0); }, EK::kInvalidArgument, "complete_until");
  unchanged();
  EXPECT_EQ(net.resource_name(link), "link");
  EXPECT_EQ(net.complete_until(FluidNetwork::kNever), std::vector<FlowId>{f});
  expect_error([&] { net.cancel_flow(f); }, EK::kOutOfRange, "cancel_flow: unknown");
}

}  // namespace
}  // namespace kvsim::model
