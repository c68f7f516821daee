// `kvsim demo`: representative transfers on a preset, with times and achieved bandwidth against
// the line rate. The default main job until the what-if study lands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/errors.h"
#include "model/fabric.h"
#include "model/preset.h"
#include "model/sim_kernel.h"

namespace {

using namespace kvsim::model;

struct Flow {
  int src, dst;
  std::uint64_t block;
  std::size_t blocks;
};

struct Case {
  std::string title;
  std::vector<Flow> flows;
};

// Runs one case on a fresh kernel; prints one line per flow and checks the bytes landed.
bool run_case(const std::string& preset, const std::vector<Override>& overrides, const Case& c) {
  fresh_kernel();
  const TopologySpec spec = load_preset(preset, overrides);
  Fabric fabric("fabric", spec);
  Topology& topo = fabric.topology();
  struct Posted {
    std::optional<BatchOutcome> out;
    std::uint64_t src_addr, dst_addr;
    Bandwidth line;
    std::string path;
  };
  std::vector<Posted> posted(c.flows.size());
  for (std::size_t i = 0; i < c.flows.size(); ++i) {
    const Flow& f = c.flows[i];
    const std::uint64_t bytes = f.block * f.blocks;
    Hbm& src = topo.memory(topo.device_memory(f.src));
    Hbm& dst = topo.memory(topo.device_memory(f.dst));
    Posted& p = posted[i];
    p.src_addr = src.allocate(bytes, 2 << 20);
    p.dst_addr = dst.allocate(bytes, 2 << 20);
    src.fill_pattern(p.src_addr, bytes, 1000 + i);
    const Route r = topo.route(topo.device_memory(f.src), topo.device_memory(f.dst), f.dst, 0);
    p.line = topo.links()[r.links.front()].nominal_effective;
    p.path = topo.links()[r.links.front()].name;
    // Post in batches of at most 1024 descriptors, as llm_datadist does (spec 3.4).
    for (std::size_t first = 0; first < f.blocks; first += 1024) {
      std::vector<CopyDescriptor> descs;
      for (std::size_t k = first; k < std::min(f.blocks, first + 1024); ++k) {
        descs.push_back({p.src_addr + k * f.block, p.dst_addr + k * f.block, f.block});
      }
      const bool last = first + 1024 >= f.blocks;
      fabric.post({f.dst, static_cast<int>(i) % spec.dma.engines}, std::move(descs),
                  [&p, last](const BatchOutcome& o) {
                    if (last || !o.ok) p.out = o;
                  });
    }
  }
  run_to_completion();
  std::printf("\n%s\n", c.title.c_str());
  bool ok = true;
  for (std::size_t i = 0; i < c.flows.size(); ++i) {
    const Flow& f = c.flows[i];
    const Posted& p = posted[i];
    const std::uint64_t bytes = f.block * f.blocks;
    if (!p.out || !p.out->ok) {
      std::printf("  %s -> %s: FAILED %s\n", topo.device_name(f.src).c_str(),
                  topo.device_name(f.dst).c_str(),
                  p.out ? p.out->error.c_str() : "(no completion)");
      ok = false;
      continue;
    }
    const double seconds = to_seconds(p.out->finished);
    const Bandwidth achieved = static_cast<double>(bytes) / seconds;
    const bool exact =
        !topo.memory(topo.device_memory(f.dst))
             .content()
             .first_difference(p.dst_addr, topo.memory(topo.device_memory(f.src)).content(),
                               p.src_addr, bytes);
    ok = ok && exact;
    std::printf(
        "  %-5s -> %-5s %9s in %5zu x %-9s over %-18s %10s  %8s  (%3.0f%% of %s effective line "
        "rate)%s\n",
        topo.device_name(f.src).c_str(), topo.device_name(f.dst).c_str(),
        format_bytes(double(bytes)).c_str(), f.blocks, format_bytes(double(f.block)).c_str(),
        p.path.c_str(), format_time(p.out->finished).c_str(), format_bandwidth(achieved).c_str(),
        100.0 * achieved / p.line, format_bandwidth(p.line).c_str(),
        exact ? "  bytes verified" : "  BYTES DIFFER");
  }
  return ok;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  CLI::App app{"kvsim: KV-cache transfer testbed on a SystemC model of NPUs, HBM and links"};
  app.require_subcommand(0, 1);
  std::string preset = "atlas-a2";
  std::vector<std::string> sets;
  CLI::App* demo = app.add_subcommand("demo", "Representative transfers on a preset (the default)");
  demo->add_option("--preset", preset, "Hardware preset name or YAML path")->capture_default_str();
  demo->add_option("--set", sets,
                   "Override a preset value, e.g. --set scale_out.bandwidth=400Gb/s");
  CLI11_PARSE(app, argc, argv);

  std::vector<Override> overrides;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "kvsim: --set '%s' must be key=value\n", s.c_str());
      return 2;
    }
    overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  try {
    const TopologySpec spec = load_preset(preset, overrides);
    std::printf("kvsim demo on preset '%s': %s\n", spec.name.c_str(), spec.description.c_str());
    const int remote =
        spec.devices_per_node < spec.nodes * spec.devices_per_node ? spec.devices_per_node : 1;
    const std::vector<Case> cases = {
        {"1. One large contiguous copy (1 GiB as 2 MiB blocks) inside a node",
         {{0, 1, 2 << 20, 512}}},
        {"2. The same copy to another node", {{0, remote, 2 << 20, 512}}},
        {"3. A PA-like batch: 2560 blocks of 16 KiB (40 layers x 64 blocks) to another node",
         {{0, remote, 16 << 10, 2560}}},
        {"4. Two competing 256 MiB flows into one NIC",
         {{0, remote, 2 << 20, 128}, {1, remote, 2 << 20, 128}}},
    };
    bool ok = true;
    for (const Case& c : cases) ok = run_case(preset, overrides, c) && ok;
    return ok ? 0 : 1;
  } catch (const ModelError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  }
}
