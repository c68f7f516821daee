// The kvsim command: `demo` (representative transfers on a preset), `run` (one scenario), `sweep`
// (a cross product of scenario values, in parallel processes), `report` (plots of a result folder).
// Exit codes: 0 success; 1 a request failed or bytes differ; 2 bad usage or input.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <systemc>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/errors.h"
#include "model/fabric.h"
#include "model/preset.h"
#include "model/sim_kernel.h"
#include "sim/fault_campaign.h"
#include "sim/report.h"
#include "sim/results_writer.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/sweep.h"
#include "sim/sweep_store.h"

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

// "key=value" into a pair; false if there is no '='.
bool split_set(const std::string& text, std::pair<std::string, std::string>& out) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  out = {text.substr(0, eq), text.substr(eq + 1)};
  return true;
}

int run_demo(const std::string& preset, const std::vector<Override>& overrides) {
  const TopologySpec spec = load_preset(preset, overrides);
  std::printf("kvsim demo on preset '%s': %s\n", spec.name.c_str(), spec.description.c_str());
  const int remote = spec.nodes > 1 ? spec.devices_per_node : 1;
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
}

/// Creates the output folder before anything is simulated, so that an unusable -o is reported
/// at once (exit 2) rather than after a long run.
void prepare_out_dir(const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error || ::access(out_dir.c_str(), W_OK) != 0) {
    throw CLI::ValidationError("-o,--out", "cannot write to '" + out_dir + "'" +
                                               (error ? ": " + error.message() : std::string()));
  }
}

int run_one(const std::string& scenario_path, const std::vector<kvsim::sim::ScenarioOverride>& sets,
            const std::string& out_dir, bool trace, bool quiet, bool report) {
  const kvsim::sim::Scenario scenario = kvsim::sim::load_scenario(scenario_path, sets);
  prepare_out_dir(out_dir);
  kvsim::sim::RunOptions options;
  options.trace = trace;
  if (!quiet) {
    options.progress = [](std::size_t done, std::size_t total) {
      std::fprintf(stderr, "\r  simulated %zu/%zu requests", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const kvsim::sim::RunResult result = kvsim::sim::run_scenario(scenario, options);
  kvsim::sim::write_results(result, out_dir);
  if (report) kvsim::sim::render_report(out_dir);
  if (!quiet) {
    std::printf("%s\nresults in %s/%s\n", kvsim::sim::summary_text(result).c_str(), out_dir.c_str(),
                report ? " (report: index.html)" : "");
  }
  return kvsim::sim::result_status(result);
}

// kvsim run FILE --faults SEEDS: exit 0 when every seed's faults were handled, 1 otherwise (or
// when the run fails without faults too, which leaves nothing to judge).
int run_campaign(const std::string& scenario_path,
                 const std::vector<kvsim::sim::ScenarioOverride>& sets,
                 const std::string& seeds_text, const std::string& out_dir, bool quiet,
                 bool report) {
  std::vector<std::uint64_t> seeds;
  try {
    seeds = kvsim::sim::parse_seeds(seeds_text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--faults", e.what());
  }
  const kvsim::sim::Scenario scenario = kvsim::sim::load_scenario(scenario_path, sets);
  if (!scenario.fault_plan) {
    throw CLI::ValidationError("--faults", scenario_path +
                                               " has no fault_plan: section (kinds, window, "
                                               "duration, count, factor, scope) to draw from");
  }
  prepare_out_dir(out_dir);
  std::vector<kvsim::sim::CampaignRun> runs;
  try {
    runs = kvsim::sim::run_fault_campaign(
        scenario, seeds, out_dir, [quiet](std::size_t done, std::size_t total) {
          if (!quiet) std::fprintf(stderr, "\r%s", kvsim::sim::progress_bar(done, total).c_str());
        });
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--faults", e.what());
  }
  if (!quiet) std::fprintf(stderr, "\n");
  const std::string md = kvsim::sim::campaign_markdown(scenario, runs);
  kvsim::sim::write_file_atomic(out_dir + "/fault_campaign.md", md);
  kvsim::sim::write_file_atomic(out_dir + "/fault_campaign.json",
                                kvsim::sim::campaign_json(scenario, runs));
  if (report) kvsim::sim::render_report(out_dir);
  std::size_t unhandled = 0;
  for (std::size_t i = 1; i < runs.size(); ++i) unhandled += runs[i].findings.empty() ? 0 : 1;
  if (!quiet || unhandled > 0 || !runs[0].findings.empty()) {
    std::printf("%s\n", md.c_str());
  }
  if (!runs[0].findings.empty()) {
    std::fprintf(stderr, "kvsim: the run fails without faults too: %s\n",
                 runs[0].findings.front().c_str());
    return 1;
  }
  if (!quiet || unhandled > 0) {
    std::printf("%zu of %zu seeds handled every fault; results in %s/%s\n",
                seeds.size() - unhandled, seeds.size(), out_dir.c_str(),
                report ? " (report: index.html)" : "");
  }
  return unhandled == 0 ? 0 : 1;
}

// kvsim sweep FILE --set ... --faults SEEDS: a fault campaign per point (point-N/), one after
// another, and fault_sweep.csv: the point's values, seeds not handled, requests lost, and SLO
// attainment without faults, averaged over the seeds and at the worst seed. Exit 0 when every
// point handled every seed.
int run_fault_sweep(const kvsim::sim::ScenarioSource& source,
                    const std::vector<kvsim::sim::SweepAxis>& axes,
                    const std::vector<std::vector<kvsim::sim::ScenarioOverride>>& grid,
                    const std::vector<kvsim::sim::PointOutcome>& points,
                    const std::string& seeds_text, const std::string& dir, bool report) {
  std::vector<std::uint64_t> seeds;
  try {
    seeds = kvsim::sim::parse_seeds(seeds_text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--faults", e.what());
  }
  for (const kvsim::sim::PointOutcome& p : points) {
    if (!p.scenario.fault_plan) {
      throw CLI::ValidationError("--faults",
                                 source.path + " has no fault_plan: section to draw from");
    }
  }
  prepare_out_dir(dir);
  std::string csv;
  for (const auto& axis : axes) csv += axis.key + ",";
  csv += "seeds,unhandled,lost,baseline_ok,baseline_attainment,mean_attainment,worst_attainment\n";
  std::size_t failing = 0;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const std::string out = dir + "/point-" + std::to_string(i);
    std::vector<kvsim::sim::CampaignRun> runs;
    try {
      runs = kvsim::sim::run_fault_campaign(points[i].scenario, seeds, out);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--faults", e.what());
    }
    kvsim::sim::write_file_atomic(out + "/fault_campaign.md",
                                  kvsim::sim::campaign_markdown(points[i].scenario, runs));
    kvsim::sim::write_file_atomic(out + "/fault_campaign.json",
                                  kvsim::sim::campaign_json(points[i].scenario, runs));
    if (report) kvsim::sim::render_report(out);
    const kvsim::sim::CampaignSummary c = kvsim::sim::summarise(points[i].scenario, runs);
    failing += c.unhandled > 0 || !c.baseline_ok ? 1 : 0;
    for (const auto& [key, value] : grid[i]) csv += value + ",";
    char row[160];
    std::snprintf(row, sizeof row, "%zu,%zu,%zu,%d,%.6f,%.6f,%.6f\n", c.seeds, c.unhandled, c.lost,
                  c.baseline_ok ? 1 : 0, c.baseline_attainment, c.mean_attainment,
                  c.worst_attainment);
    csv += row;
    std::fprintf(stderr, "\r%s", kvsim::sim::progress_bar(i + 1, grid.size()).c_str());
  }
  std::fprintf(stderr, "\n");
  kvsim::sim::write_file_atomic(dir + "/fault_sweep.csv", csv);
  if (report) kvsim::sim::render_report(dir);
  std::printf(
      "fault sweep of %zu points x %zu seeds: %zu points with a fault not handled; %s/"
      "fault_sweep.csv%s\n",
      grid.size(), seeds.size(), failing, dir.c_str(),
      (report ? ", report " + dir + "/index.html" : std::string()).c_str());
  return failing == 0 ? 0 : 1;
}

volatile std::sig_atomic_t g_interrupted = 0;

// The sweep's SIGINT/SIGTERM: stop at the next wait, keep what is finished, say how to resume.
struct Interrupted {
  int signal;
};

int run_sweep(std::string scenario_path, const std::vector<std::string>& sets,
              const std::string& out_dir, int jobs, bool report, const std::string& resume,
              const std::string& fault_seeds) {
  if (!fault_seeds.empty() && !resume.empty()) {
    throw CLI::ValidationError("--faults", "a fault sweep cannot be resumed: run it again");
  }
  std::vector<kvsim::sim::SweepAxis> axes;
  const bool resuming = !resume.empty();
  std::string dir = resuming ? resume : out_dir;
  if (resuming) {
    if (!sets.empty() || !scenario_path.empty()) {
      throw CLI::ValidationError("--resume", "takes the scenario and axes from " + resume +
                                                 "/sweep.json: give no scenario and no --set");
    }
    try {
      const kvsim::sim::SweepManifest m = kvsim::sim::read_sweep_manifest(resume);
      scenario_path = m.scenario;
      axes = m.axes;
      // Results name the scenario as it was first given: resume from where it was given.
      dir = std::filesystem::absolute(resume).lexically_normal().string();
      std::error_code ec;
      std::filesystem::current_path(m.cwd, ec);
      if (ec) throw std::runtime_error("cannot return to " + m.cwd + ": " + ec.message());
    } catch (const std::runtime_error& e) {
      throw CLI::ValidationError("--resume", e.what());
    }
  } else if (scenario_path.empty()) {
    throw CLI::ValidationError("scenario", "give a scenario file, or --resume DIR");
  }
  for (const auto& s : sets) {
    std::pair<std::string, std::string> kv;
    if (!split_set(s, kv)) throw CLI::ValidationError("--set", "'" + s + "' must be key=v1,v2,...");
    axes.push_back({kv.first, kvsim::sim::split_values(kv.second)});
  }
  if (axes.empty()) {
    for (const auto& [key, values] : kvsim::sim::load_scenario(scenario_path).sweep) {
      axes.push_back({key, values});
    }
    if (axes.empty()) {
      throw CLI::ValidationError(
          "--set", "give --set key=v1,v2,... or a sweep: section in " + scenario_path);
    }
  }
  std::vector<std::vector<kvsim::sim::ScenarioOverride>> grid;
  try {
    grid = kvsim::sim::cross_product(axes);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--set", e.what());
  }
  kvsim::sim::ScenarioSource source;
  source.path = scenario_path;
  // Every point parses before the folder is touched (a bad value throws here).
  std::vector<kvsim::sim::PointOutcome> points(grid.size());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    points[i].overrides = grid[i];
    points[i].scenario = source.load(grid[i]);
  }
  if (!fault_seeds.empty()) {
    return run_fault_sweep(source, axes, grid, points, fault_seeds, dir, report);
  }
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    std::optional<kvsim::sim::RunResult> kept;
    if (resuming) kept = kvsim::sim::read_sweep_point(dir, i, points[i].scenario);
    if (kept) {
      points[i].result = std::move(kept);
      points[i].exit_code = kvsim::sim::result_status(*points[i].result);
    } else {
      todo.push_back(i);
    }
  }
  if (resuming) {
    std::fprintf(stderr, "kvsim: resuming %s: %zu of %zu points kept, %zu to run\n", dir.c_str(),
                 grid.size() - todo.size(), grid.size(), todo.size());
  } else {
    prepare_out_dir(dir);
    kvsim::sim::begin_sweep_folder(dir,
                                   {scenario_path, std::filesystem::current_path().string(), axes});
  }
  std::vector<std::vector<kvsim::sim::ScenarioOverride>> subgrid;
  for (const std::size_t i : todo) subgrid.push_back(grid[i]);
  kvsim::sim::PointRunOptions options;
  options.jobs = jobs;
  const std::size_t kept = grid.size() - todo.size();
  options.progress = [kept, &grid](std::size_t done, std::size_t) {
    std::fprintf(stderr, "\r%s", kvsim::sim::progress_bar(kept + done, grid.size()).c_str());
  };
  std::size_t finished = kept;
  options.on_point = [&](std::size_t k, const kvsim::sim::PointOutcome& o) {
    kvsim::sim::write_sweep_point(dir, todo[k], o);
    if (o.result) ++finished;
  };
  options.interrupted = [] {
    if (g_interrupted != 0) throw Interrupted{g_interrupted};
  };
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { g_interrupted = sig; };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the wait for children returns, and the sweep stops
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  try {
    const auto ran = kvsim::sim::run_points(source, subgrid, options);
    for (std::size_t k = 0; k < todo.size(); ++k) points[todo[k]] = ran[k];
  } catch (const Interrupted& stop) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    std::fprintf(stderr,
                 "\nkvsim: interrupted: %zu of %zu points are kept in %s; resume with: "
                 "kvsim sweep --resume %s\n",
                 finished, grid.size(), dir.c_str(), dir.c_str());
    return 128 + stop.signal;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  std::fprintf(stderr, "\n");
  int worst = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    worst = std::max(worst, points[i].exit_code);
    if (!points[i].result)
      std::fprintf(stderr, "kvsim: point %zu: %s\n", i, points[i].error.c_str());
  }
  kvsim::sim::write_file_atomic(dir + "/sweep.csv", kvsim::sim::sweep_csv(axes, points));
  if (report) kvsim::sim::render_report(dir);
  kvsim::sim::end_sweep_folder(dir);
  std::printf("sweep of %zu points: %s/sweep.csv%s\n", points.size(), dir.c_str(),
              (report ? ", report " + dir + "/index.html" : std::string()).c_str());
  return worst;
}

// The directory holding the kvsim Python package next to this program: the build tree's
// <build>/python, or an installed <prefix>/<KVSIM_PYTHON_INSTALL_DIR>; empty if neither.
std::string python_package_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const std::filesystem::path& dir :
       {exe.parent_path().parent_path() / "python",
        exe.parent_path().parent_path() / KVSIM_PYTHON_INSTALL_DIR}) {
    if (std::filesystem::exists(dir / "kvsim" / "launch" / "__main__.py")) return dir.string();
  }
  return {};
}

// kvsim launch and kvsim sensitivity are Python (the launcher hosts programs in its interpreter;
// the analysis drives kvsim.sweep's point runner): this program only finds the package and hands
// over the arguments untouched.
int run_python_module(const char* module, int argc, char* argv[]) {
  const std::string dir = python_package_dir();
  if (!dir.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old != nullptr && *old != '\0' ? dir + ":" + old : dir;
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  std::vector<char*> args = {const_cast<char*>(KVSIM_PYTHON), const_cast<char*>("-m"),
                             const_cast<char*>(module)};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(KVSIM_PYTHON, args.data());
  std::fprintf(stderr, "kvsim: cannot run %s -m %s: %s\n", KVSIM_PYTHON, module,
               std::strerror(errno));
  return 2;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  if (argc >= 2 && std::string(argv[1]) == "launch") {
    return run_python_module("kvsim.launch", argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "sensitivity") {
    return run_python_module("kvsim.sensitivity", argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "validate") {
    return run_python_module("kvsim.validation", argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "calibrate") {
    return run_python_module("kvsim.calibration", argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "sweep") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]).rfind("--dask", 0) == 0) {
        return run_python_module("kvsim.dask_sweep", argc, argv);
      }
    }
  }
  CLI::App app{"kvsim: KV-cache transfer testbed on a SystemC model of NPUs, HBM and links"};
  app.require_subcommand(1);
  app.add_subcommand("launch",
                     "Run Python programs written for llm_datadist, unchanged, as processes of "
                     "one simulated world (kvsim launch --help)");
  app.add_subcommand("sensitivity",
                     "Vary the preset's inferred parameters over their plausible ranges: tornado "
                     "plots, and whether a sweep's conclusion holds (kvsim sensitivity --help)");
  app.add_subcommand("validate",
                     "Predict published hardware measurements (scenarios/validation) and "
                     "tabulate the errors (kvsim validate --help)");
  app.add_subcommand("calibrate",
                     "Refit a preset's fitted values to their published rows, with leave-one-out "
                     "errors (kvsim calibrate --help)");
  std::string preset = "atlas-a2";
  std::vector<std::string> preset_sets;
  CLI::App* demo = app.add_subcommand("demo", "Representative transfers on a hardware preset");
  demo->add_option("--preset", preset, "Hardware preset name or YAML path")->capture_default_str();
  demo->add_option("--set", preset_sets,
                   "Override a preset value, e.g. --set scale_out.bandwidth=400Gb/s");

  std::string scenario, out_dir = "out";
  std::vector<std::string> sets;
  bool no_trace = false, quiet = false, no_report = false;
  int jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  CLI::App* run = app.add_subcommand("run", "Simulate one scenario and write its results");
  run->add_option("scenario", scenario, "Scenario YAML file")->required()->check(CLI::ExistingFile);
  run->add_option("-o,--out", out_dir, "Output folder")->capture_default_str();
  run->add_option("--set", sets,
                  "Override a scenario value, e.g. --set hardware.scale_out.bandwidth=400Gb/s");
  run->add_flag("--no-trace", no_trace, "Do not write trace.json");
  run->add_flag("-q,--quiet", quiet, "Print nothing on success");
  run->add_flag("--no-report", no_report, "Do not render plots and index.html");
  std::string fault_seeds;
  run->add_option("--faults", fault_seeds,
                  "A fault campaign: SEED, FIRST-LAST or a list of them; one run per seed with "
                  "faults drawn from the scenario's fault_plan:, plus one without");
  CLI::App* sweep =
      app.add_subcommand("sweep",
                         "Run the cross product of --set value lists (or the scenario's "
                         "sweep: section) in parallel");
  std::string resume;
  sweep->add_option("scenario", scenario, "Scenario YAML file (not with --resume)")
      ->check(CLI::ExistingFile);
  sweep->add_option("--resume", resume,
                    "Finish the interrupted sweep in this folder: run only its missing points");
  sweep->add_option("-o,--out", out_dir, "Output folder")->capture_default_str();
  sweep->add_option("--set", sets,
                    "key=v1,v2,... (repeatable; the cross product is run); default: the "
                    "scenario's sweep: section");
  sweep->add_option("-j,--jobs", jobs, "Parallel processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sweep->add_flag("--no-report", no_report, "Do not render plots and index.html");
  std::string sweep_fault_seeds;
  sweep->add_option("--faults", sweep_fault_seeds,
                    "A fault campaign per point (SEED, FIRST-LAST or a list): fault_sweep.csv "
                    "says which points handle every seed");
  std::string dask_address;  // handled by kvsim.dask_sweep before this parser runs
  sweep->add_option("--dask", dask_address,
                    "Run the points on a Dask cluster: a scheduler address (tcp://host:8786) or "
                    "local:N (N local workers); results are those of a local sweep");
  std::string report_dir;
  CLI::App* report =
      app.add_subcommand("report", "Render a run or sweep folder (plots and index.html)");
  report->add_option("dir", report_dir, "Output folder of kvsim run or kvsim sweep")
      ->required()
      ->check(CLI::ExistingDirectory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; any other usage error exits 2, as the README promises.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    if (*demo) {
      std::vector<Override> overrides;
      for (const auto& s : preset_sets) {
        std::pair<std::string, std::string> kv;
        if (!split_set(s, kv)) throw CLI::ValidationError("--set", "'" + s + "' must be key=value");
        overrides.push_back(kv);
      }
      return run_demo(preset, overrides);
    }
    if (*run) {
      std::vector<kvsim::sim::ScenarioOverride> overrides;
      for (const auto& s : sets) {
        std::pair<std::string, std::string> kv;
        if (!split_set(s, kv)) throw CLI::ValidationError("--set", "'" + s + "' must be key=value");
        overrides.push_back(kv);
      }
      if (!fault_seeds.empty()) {
        return run_campaign(scenario, overrides, fault_seeds, out_dir, quiet, !no_report);
      }
      return run_one(scenario, overrides, out_dir, !no_trace, quiet, !no_report && !no_trace);
    }
    if (*report) {
      for (const auto& image : kvsim::sim::render_report(report_dir)) {
        std::printf("%s/%s.png, .svg\n", report_dir.c_str(), image.c_str());
      }
      std::printf("%s/index.html\n", report_dir.c_str());
      return 0;
    }
    return run_sweep(scenario, sets, out_dir, jobs, !no_report, resume, sweep_fault_seeds);
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  } catch (const ModelError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 1;
  }
}

// Ahead of libsystemc's main, which builds a context (and prints the banner) before sc_main.
int main(int argc, char* argv[]) {
  kvsim::model::quiet_banner();
  return sc_core::sc_elab_and_sim(argc, argv);
}
