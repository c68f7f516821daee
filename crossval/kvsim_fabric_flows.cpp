// kvsim's Fabric side of the cross-validation tier (crossval/README.md): flow sets recorded from
// SystemC Fabric runs, each flow carrying the Fabric's own finish time (fabric_finish_ps).
//   kvsim_fabric_flows record SCENARIO OUT.json [k=v...]  a scenario's transfers, as the Fabric
//                                                         ran them
//   kvsim_fabric_flows fabric-random SEED OUT.json [k=v...]  random batches on A2 servers (preset
//                                                         overrides: more nodes, leaf-spine), a
//                                                         RoCE link degrading mid-flight
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "crossval/fabric_recorder.h"
#include "crossval/flow_set.h"
#include "model/preset.h"
#include "model/sim_kernel.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace kvsim::crossval {
namespace {

int record(const std::string& scenario_path, const std::string& out,
           const std::vector<sim::ScenarioOverride>& overrides) {
  const sim::Scenario scenario = sim::load_scenario(scenario_path, overrides);
  std::unique_ptr<FabricRecorder> recorder;
  sim::RunOptions options;
  options.trace = false;
  options.attach = [&](model::Fabric& fabric) {
    recorder = std::make_unique<FabricRecorder>(fabric);
    fabric.set_observer(recorder.get());
  };
  const sim::RunResult result = sim::run_scenario(scenario, options);
  for (const sim::RequestResult& r : result.requests) {
    if (!r.ok) throw std::runtime_error("request " + std::to_string(r.id) + ": " + r.status);
  }
  write_flow_set(recorder->flow_set(std::filesystem::path(scenario_path).stem().string(),
                                    "the transfers of scenario " + scenario_path),
                 out);
  return 0;
}

// Batches of random sizes, block counts, engines and start times between the NPUs of Atlas 800
// A2 servers (HCCS mesh inside a server, RoCE between them, and copies inside one HBM), while
// one RoCE link degrades to 40 % and recovers.
int fabric_random(std::uint32_t seed, const std::string& out,
                  const std::vector<model::Override>& overrides) {
  model::fresh_kernel();
  const model::TopologySpec spec = model::load_preset("atlas-a2", overrides);
  auto fabric = std::make_unique<model::Fabric>("fabric", spec);
  FabricRecorder recorder(*fabric);
  fabric->set_observer(&recorder);
  model::Topology& topo = fabric->topology();
  std::mt19937_64 rng(seed);
  // Not std::uniform_int_distribution: its algorithm differs between standard libraries.
  auto pick = [&rng](std::uint64_t lo, std::uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  if (spec.nodes < 2 || spec.devices_per_node != 8) {
    throw std::invalid_argument("fabric-random needs at least 2 nodes of 8 devices (A2 servers)");
  }
  const int devices = topo.device_count();
  std::size_t ended = 0;
  const int batches = 40;
  for (int i = 0; i < batches; ++i) {
    const int src = static_cast<int>(pick(0, static_cast<std::uint64_t>(devices - 1)));
    const std::uint64_t kind = pick(0, 9);  // 0: same HBM, 1-4: HCCS, 5-9: RoCE
    int dst = src;
    if (kind >= 1 && kind <= 4) {
      dst =
          (src / 8) * 8 + static_cast<int>((static_cast<std::uint64_t>(src % 8) + pick(1, 7)) % 8);
    } else if (kind >= 5) {
      const int nodes = topo.spec().nodes;
      const int other =
          (src / 8 + 1 + static_cast<int>(pick(0, static_cast<std::uint64_t>(nodes - 2)))) % nodes;
      dst = other * 8 + static_cast<int>(pick(0, 7));
    }
    const std::uint64_t block = 4096ull << pick(0, 10);  // 4 KiB .. 4 MiB
    const std::uint64_t count = pick(1, 96);
    const std::uint64_t a = topo.memory(topo.device_memory(src)).allocate(block * count, 2 << 20);
    const std::uint64_t b = topo.memory(topo.device_memory(dst)).allocate(block * count, 2 << 20);
    std::vector<model::CopyDescriptor> descs;
    for (std::uint64_t k = 0; k < count; ++k)
      descs.push_back({a + k * block, b + k * block, block});
    const model::EngineRef engine{src, static_cast<int>(pick(0, 3))};
    const sc_core::sc_time at(static_cast<double>(pick(0, 3000)), sc_core::SC_US);
    sc_core::sc_spawn([&fabric, &ended, engine, descs, at]() mutable {
      sc_core::wait(at);
      fabric->post(engine, std::move(descs), [&ended](const model::BatchOutcome& o) {
        if (!o.ok) throw std::runtime_error("a batch failed: " + o.error);
        ++ended;
      });
    });
  }
  const model::Link& l =
      topo.links().at(topo.route(topo.device_memory(0), topo.device_memory(8), 0, 0).links.front());
  const std::string link = l.name;  // device 0's NIC
  fabric->schedule_link_event(link, 1500 * model::kUs, {model::LinkEvent::Kind::kDegrade, 0.4});
  fabric->schedule_link_event(link, 4000 * model::kUs, {model::LinkEvent::Kind::kUp, 1.0});
  model::run_to_completion();
  if (ended != static_cast<std::size_t>(batches))
    throw std::runtime_error("batches left unfinished");
  std::string how;
  for (const auto& [key, value] : overrides) how += ", " + key + "=" + value;
  write_flow_set(
      recorder.flow_set("fabric-random-" + std::to_string(seed),
                        "40 random batches on " + std::to_string(spec.nodes) +
                            " Atlas 800 A2 servers" + how + ", seed " + std::to_string(seed) +
                            ", " + link + " at 40 % from 1.5 ms to 4 ms"),
      out);
  fabric.reset();
  model::fresh_kernel();
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: kvsim_fabric_flows record SCENARIO.yaml OUT.json [key=value ...]\n"
               "       kvsim_fabric_flows fabric-random SEED OUT.json [key=value ...]\n");
  return 2;
}

}  // namespace
}  // namespace kvsim::crossval

int sc_main(int argc, char* argv[]) {
  using namespace kvsim::crossval;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    std::vector<std::pair<std::string, std::string>> overrides;
    for (std::size_t i = 3; i < args.size(); ++i) {
      const std::size_t eq = args[i].find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "kvsim_fabric_flows: override '%s' must be key=value\n",
                     args[i].c_str());
        return 2;
      }
      overrides.emplace_back(args[i].substr(0, eq), args[i].substr(eq + 1));
    }
    if (args.size() >= 3 && args[0] == "record") return record(args[1], args[2], overrides);
    if (args.size() >= 3 && args[0] == "fabric-random") {
      return fabric_random(static_cast<std::uint32_t>(std::stoul(args[1])), args[2], overrides);
    }
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim_fabric_flows: %s\n", e.what());
    return 1;
  }
}
