// simgrid_flows: runs a kvsim flow set through SimGrid 3.32's max-min network model (CM02, s4u
// API) and writes each flow's completion time: an independent reference for kvsim's fluid solver.
//
//   simgrid_flows IN.json OUT.json [--cfg=name:value ...]   (extra args go to SimGrid, and win)
//
// Platform: one Full-routing zone; each flow gets its own (src, dst) host pair and an explicit
// one-way route; every resource is a latency-0 SHARED link, and a capped flow also crosses a
// private link of bandwidth `cap` (Comm::set_rate would not do: in 3.32 it only reaches mailbox
// comms, not Comm::sendto ones; s4u_Comm.cpp). Each flow is an actor that sleeps until its start,
// then does Comm::sendto(src, dst, bytes); one more actor applies capacity changes with
// Link::set_bandwidth. SimGrid options set, and why, are in kOptions.
//
// Weights: a resource of weight w is listed w times in the route. System::expand
// (src/kernel/lmm/System.cpp) reuses the flow's element for that constraint and adds the
// consumption weight again (expand_add_to_elem, SHARED policy), so the flow counts w times.
//
// Capacity increases: CM02 also bounds each comm's rate by the smallest bandwidth on its route
// *when it starts* (NetworkCm02Model::comm_action_set_bounds, src/surf/network_cm02.cpp), and
// NetworkCm02Link::set_bandwidth only updates the link's constraint, so a flow would stay capped
// at a capacity that has since risen. To keep that bound slack, a resource whose capacity rises
// over time by at most a power-of-two factor K becomes a link of bandwidth K*C listed K*w times:
// the constraint K*w*x <= K*C is the same (exactly scaled floats), and the start bound K*C(start)
// is at least any later C(t), itself at least the flow's rate.
//
// Bytes: Comm::sendto takes whole bytes, so fractional sizes are scaled, with every bandwidth, by
// a power of two (byte_scale, written to the output); times are unchanged.
#include <simgrid/s4u.hpp>  // first: simgrid/version.h needs its macros

#include <simgrid/version.h>
#include <xbt/config.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;
using nlohmann::json;

namespace {

// SimGrid config options (name, value) making CM02 an exact max-min solver.
const std::vector<std::pair<std::string, json>> kOptions = {
    // Plain max-min sharing; the default LV08 adds bandwidth/latency factors and RTT weighting.
    {"network/model", "CM02"},
    // The linear max-min solver (the default; "bmf" and "fairbottleneck" are other policies).
    {"network/solver", "maxmin"},
    // Else each flow also loads its reverse route with weight 0.05
    // (NetworkCm02Model::comm_action_expand_constraints).
    {"network/crosstraffic", false},
    // CM02's own defaults (surf_network_model_init_CM02), set explicitly.
    {"network/latency-factor", 1.0},
    {"network/bandwidth-factor", 1.0},
    {"network/weight-S", 0.0},
    // The default: completions come from a heap of predicted dates, and only the actions whose
    // share changed are updated. Full gives the same times here, about 3x slower.
    {"network/optim", "Lazy"},
    // A constraint counts as saturated once its unallocated capacity is below precision x its
    // capacity (MaxMin::maxmin_solve, src/kernel/lmm/maxmin.cpp). Default 1e-5.
    {"maxmin/precision", 1e-12},
    // Seconds: actions due within it of the current date complete together (CpuImpl.cpp and
    // network_cm02.cpp, update_actions_state_lazy); sleeps shorter than it last it. Default 1e-9
    // merges events up to 1 ns apart; 1e-13 is below kvsim's 1 ps grid. Smaller works while
    // the clock lands exactly on due dates (else "did not finish"): seen down to 1e-20.
    {"surf/precision", 1e-13},
    // KiB per actor (default 8192): one actor per flow.
    {"contexts/stack-size", 256},
    // network/TCP-gamma is left alone: its rate bound gamma / (2 * latency) only applies when the
    // route's latency is > 0 (NetworkCm02Model::comm_action_set_variable), never here.
};

struct Use {
  std::size_t resource;
  int weight;
};

struct Flow {
  std::int64_t id;
  double bytes;
  std::int64_t start_ps;
  std::vector<Use> path;
  std::optional<double> cap;
};

struct Change {
  std::int64_t at_ps;
  std::size_t resource;
  double capacity;
};

struct Input {
  std::vector<std::string> resource_names;
  std::vector<double> capacities;
  std::vector<Flow> flows;
  std::vector<Change> changes;  // sorted by time
};

/// Converts integer picoseconds to seconds (one correctly rounded division).
double ps_to_s(std::int64_t ps) {
  return static_cast<double>(ps) / 1e12;
}

/// Returns `x` if it is finite and > 0, else throws naming `what`.
double positive(double x, const std::string& what) {
  if (!(x > 0) || !std::isfinite(x)) throw std::runtime_error(what + " must be finite and > 0");
  return x;
}

/// Parses and validates the input flow set.
Input parse_input(const json& j) {
  Input in;
  for (const auto& r : j.at("resources")) {
    in.resource_names.push_back(r.at("name").get<std::string>());
    in.capacities.push_back(positive(r.at("capacity").get<double>(), "resource capacity"));
  }
  auto resource_index = [&](const json& v) {
    auto r = v.get<std::int64_t>();
    if (r < 0 || static_cast<std::size_t>(r) >= in.capacities.size()) {
      throw std::runtime_error("unknown resource " + std::to_string(r));
    }
    return static_cast<std::size_t>(r);
  };
  for (const auto& f : j.at("flows")) {
    Flow flow{f.at("id").get<std::int64_t>(),
              positive(f.at("bytes").get<double>(), "flow bytes"),
              f.at("start_ps").get<std::int64_t>(),
              {},
              std::nullopt};
    if (flow.start_ps < 0) throw std::runtime_error("start_ps must be >= 0");
    for (const auto& u : f.at("path")) {
      const double w = u.value("weight", 1.0);
      if (w < 1 || w > 64 || w != std::floor(w)) {
        throw std::runtime_error("path weights must be integers in [1, 64]");
      }
      flow.path.push_back({resource_index(u.at("resource")), static_cast<int>(w)});
    }
    if (f.contains("cap") && !f.at("cap").is_null()) {
      flow.cap = positive(f.at("cap").get<double>(), "flow cap");
    }
    if (flow.path.empty() && !flow.cap) throw std::runtime_error("flow with no path and no cap");
    in.flows.push_back(std::move(flow));
  }
  for (const auto& c : j.value("capacity_changes", json::array())) {
    in.changes.push_back({c.at("at_ps").get<std::int64_t>(), resource_index(c.at("resource")),
                          positive(c.at("capacity").get<double>(), "changed capacity")});
  }
  std::stable_sort(in.changes.begin(), in.changes.end(),
                   [](const Change& a, const Change& b) { return a.at_ps < b.at_ps; });
  return in;
}

/// Smallest power of two S making every flow's bytes * S whole, as long as the largest flow's
/// bytes * S stays below 2^53 (the action size is a double); beyond that, bytes are rounded.
double byte_scale(const Input& in) {
  double max_bytes = 0, scale = 1;
  for (const Flow& f : in.flows) max_bytes = std::max(max_bytes, f.bytes);
  for (const Flow& f : in.flows) {
    while (f.bytes * scale != std::floor(f.bytes * scale) && max_bytes * scale * 2 <= 0x1p53) {
      scale *= 2;
    }
  }
  return scale;
}

/// Per resource, the smallest power of two K with K * C(s) >= C(t) for all times s <= t.
std::vector<int> rise_factors(const Input& in) {
  std::vector<double> low = in.capacities;
  std::vector<int> k(in.capacities.size(), 1);
  for (const Change& c : in.changes) {
    low[c.resource] = std::min(low[c.resource], c.capacity);
    while (k[c.resource] * low[c.resource] < c.capacity) {
      if (k[c.resource] == 1 << 12) throw std::runtime_error("capacity rises more than 4096x");
      k[c.resource] *= 2;
    }
  }
  return k;
}

/// Builds the platform and actors, runs SimGrid, and returns each flow's finish time (s).
/// Bytes and bandwidths are all multiplied by `scale`.
std::vector<double> simulate(const Input& in, double scale) {
  const std::size_t n = in.flows.size();
  const std::vector<int> k = rise_factors(in);
  auto bandwidth = [&](std::size_t r, double capacity) { return scale * k[r] * capacity; };

  auto* zone = sg4::create_full_zone("world");
  // Fewest hosts h with h*(h-1) >= n ordered pairs: the Full routing table has h*h entries.
  std::size_t h = 2;
  while (h * (h - 1) < n) ++h;
  std::vector<sg4::Host*> hosts;
  for (std::size_t i = 0; i < h; ++i)
    hosts.push_back(zone->create_host("h" + std::to_string(i), 1e9));

  std::vector<sg4::Link*> links(in.capacities.size(), nullptr);  // only resources flows cross
  auto link_of = [&](std::size_t r) {
    if (!links[r]) {
      links[r] = zone->create_link(in.resource_names[r] + "#" + std::to_string(r),
                                   bandwidth(r, in.capacities[r]));
      links[r]->set_latency(0)->seal();
    }
    return links[r];
  };

  std::vector<std::pair<sg4::Host*, sg4::Host*>> ends(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Flow& f = in.flows[i];
    std::size_t a = i / (h - 1), b = i % (h - 1);
    if (b >= a) ++b;  // (a, b) runs over the ordered pairs of distinct hosts
    ends[i] = {hosts[a], hosts[b]};
    std::vector<sg4::LinkInRoute> route;
    for (const Use& u : f.path) {
      for (int c = 0; c < k[u.resource] * u.weight; ++c) route.emplace_back(link_of(u.resource));
    }
    if (f.cap) {
      auto* cap = zone->create_link("cap#" + std::to_string(i), scale * *f.cap);
      cap->set_latency(0)->seal();
      route.emplace_back(cap);
    }
    zone->add_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr, route,
                    /*symmetrical=*/false);
  }
  zone->seal();

  std::vector<double> finish(n, -1.0);
  for (std::size_t i = 0; i < n; ++i) {
    sg4::Actor::create("flow" + std::to_string(i), ends[i].first, [&, i] {
      sg4::this_actor::sleep_until(ps_to_s(in.flows[i].start_ps));
      sg4::Comm::sendto(ends[i].first, ends[i].second,
                        static_cast<std::uint64_t>(std::llround(in.flows[i].bytes * scale)));
      finish[i] = sg4::Engine::get_clock();
    });
  }
  if (!in.changes.empty()) {
    sg4::Actor::create("capacity", hosts[0], [&] {
      for (const Change& c : in.changes) {
        sg4::this_actor::sleep_until(ps_to_s(c.at_ps));
        if (links[c.resource]) links[c.resource]->set_bandwidth(bandwidth(c.resource, c.capacity));
      }
    });
  }
  sg4::Engine::get_instance()->run();

  for (std::size_t i = 0; i < n; ++i) {
    if (finish[i] < 0) {
      throw std::runtime_error("flow " + std::to_string(in.flows[i].id) + " did not finish");
    }
  }
  return finish;
}

/// The value in force of every option in kOptions, read back from SimGrid's config.
json effective_options() {
  namespace cfg = simgrid::config;
  json opts = json::object();
  for (const auto& [name, value] : kOptions) {
    if (value.is_string()) {
      opts[name] = cfg::get_value<std::string>(name);
    } else if (value.is_boolean()) {
      opts[name] = cfg::get_value<bool>(name);
    } else if (value.is_number_integer()) {
      opts[name] = cfg::get_value<int>(name);
    } else {
      opts[name] = cfg::get_value<double>(name);
    }
  }
  return opts;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " IN.json OUT.json [--cfg=name:value ...]\n";
    return 2;
  }
  try {
    std::ifstream is(argv[1]);
    if (!is) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    const Input in = parse_input(json::parse(is));

    // SimGrid's argv: silent logs, kOptions, then the user's extra args.
    std::vector<std::string> args = {argv[0], "--log=root.thresh:critical"};
    for (const auto& [name, value] : kOptions) {
      args.push_back("--cfg=" + name + ":" +
                     (value.is_string() ? value.get<std::string>() : value.dump()));
    }
    args.insert(args.end(), argv + 3, argv + argc);
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    int cargc = static_cast<int>(args.size());
    sg4::Engine engine(&cargc, cargs.data());

    const double scale = byte_scale(in);
    // Wall time of building the platform and running it, without process start and I/O (for
    // bench/flows_vs_simgrid.py; never part of a result).
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<double> finish = simulate(in, scale);
    const double sim_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json out = {{"engine", "simgrid " + std::to_string(SIMGRID_VERSION_MAJOR) + "." +
                               std::to_string(SIMGRID_VERSION_MINOR)},
                {"options", effective_options()},
                {"byte_scale", scale},
                {"wall_seconds", sim_seconds},
                {"flows", json::array()}};
    for (std::size_t i = 0; i < finish.size(); ++i) {
      out["flows"].push_back({{"id", in.flows[i].id}, {"finish_s", finish[i]}});
    }
    std::ofstream os(argv[2]);
    os << out.dump(1) << "\n";
    if (!os) throw std::runtime_error(std::string("cannot write ") + argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "simgrid_flows: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
