#include "sim/fault_campaign.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "model/preset.h"
#include "sim/results_writer.h"
#include "sim/serving/metrics.h"
#include "sim/serving/serving_runner.h"

namespace kvsim::sim {

namespace {

std::string run_name(const CampaignRun& run) {
  return run.seed ? "seed-" + std::to_string(*run.seed) : "baseline";
}

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %%", 100 * share);
  return text;
}

std::string millis(double us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", us / 1e3);
  return text;
}

int retries_of(const RunResult& r) {
  int n = 0;
  for (const RequestResult& q : r.requests) n += q.retries;
  return n;
}

int recomputes_of(const RunResult& r) {
  int n = 0;
  for (const RequestResult& q : r.requests) n += q.recomputes;
  return n;
}

std::size_t lost_of(const RunResult& r) {
  std::size_t n = 0;
  for (const RequestResult& q : r.requests) n += q.ok ? 0 : 1;
  return n;
}

// Share of requests that met both SLOs (serving), or that succeeded (a single-request run).
double attainment(const Scenario& s, const RunResult& r) {
  if (s.serving) return serving::serving_metrics(r).slo_attainment;
  return r.requests.empty()
             ? 0
             : 1.0 - static_cast<double>(lost_of(r)) / static_cast<double>(r.requests.size());
}

double ttft_p99_us(const RunResult& r) {
  std::vector<double> ttft;
  for (const RequestResult& q : r.requests) {
    if (q.ok) ttft.push_back(model::to_seconds(q.ttft()) * 1e6);
  }
  return serving::percentiles(std::move(ttft)).p99;
}

}  // namespace

std::vector<int> nodes_in_use(const Scenario& scenario) {
  if (scenario.serving) {
    return serving::serving_nodes(scenario,
                                  model::load_preset(scenario.preset, scenario.hardware_overrides));
  }
  return {scenario.prompt_node, scenario.decode_node};
}

std::vector<std::string> findings_of(const RunResult& result) {
  std::vector<std::string> out;
  std::map<std::string, std::size_t> lost;  // status -> requests
  std::string first;
  std::size_t differ = 0;
  for (const RequestResult& q : result.requests) {
    if (!q.ok) {
      if (lost.empty()) first = "request " + std::to_string(q.id);
      ++lost[q.status];
    } else if (q.checked && !q.verified) {
      ++differ;
    }
  }
  if (!lost.empty()) {
    std::string what;
    std::size_t total = 0;
    for (const auto& [status, n] : lost) {
      what += (what.empty() ? "" : ", ") + std::to_string(n) + " " + status;
      total += n;
    }
    out.push_back(std::to_string(total) + " of " + std::to_string(result.requests.size()) +
                  " requests lost (" + what + "; the first is " + first + ")");
  }
  if (differ > 0) {
    out.push_back(std::to_string(differ) + " requests' KV bytes differ from the prompt side's");
  }
  return out;
}

std::vector<CampaignRun> run_fault_campaign(
    const Scenario& scenario, const std::vector<std::uint64_t>& seeds, const std::string& out_dir,
    const std::function<void(std::size_t, std::size_t)>& progress) {
  if (!scenario.fault_plan) {
    throw std::invalid_argument("--faults: " + scenario.origin +
                                " has no fault_plan: section to draw faults from");
  }
  std::vector<FaultTarget> targets;
  std::vector<FaultTarget> devices;
  std::vector<FaultTarget> processes;
  if (scenario.serving) {
    const std::vector<std::string>& allowed = scenario.fault_plan->processes;
    for (const std::string& name : serving::instance_names(scenario)) {
      if (allowed.empty() || std::find(allowed.begin(), allowed.end(), name) != allowed.end()) {
        processes.push_back({name, {}, "", {}});
      }
    }
  }
  {
    const model::TopologySpec spec =
        model::load_preset(scenario.preset, scenario.hardware_overrides);
    model::FluidNetwork net;
    const model::Topology topo(spec, net);
    targets = fault_targets(topo, nodes_in_use(scenario), scenario.fault_plan->per_nic);
    devices = device_targets(topo, nodes_in_use(scenario), scenario.fault_plan->per_nic);
  }
  std::vector<CampaignRun> runs(seeds.size() + 1);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    runs[i + 1].seed = seeds[i];
    // Drawn up front, so that a plan that cannot draw fails before anything runs.
    runs[i + 1].faults = draw_faults(*scenario.fault_plan, seeds[i], targets, devices, processes);
  }
  RunOptions options;
  options.trace = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    CampaignRun& run = runs[i];
    Scenario s = scenario;
    for (const FaultSpec& f : link_events(run.faults)) s.faults.push_back(f);
    s.memory_faults = memory_faults(run.faults);
    s.process_faults = process_faults(run.faults);
    s.completion_delays = completion_delays(run.faults);
    s.queue_stalls = queue_stalls(run.faults);
    try {
      run.result = run_scenario(s, options);
      run.findings = findings_of(*run.result);
      write_results(*run.result, out_dir + "/" + run_name(run));
    } catch (const std::runtime_error& e) {
      run.findings.push_back(std::string("the run did not finish: ") + e.what());
    }
    if (progress) progress(i + 1, runs.size());
  }
  return runs;
}

CampaignSummary summarise(const Scenario& scenario, const std::vector<CampaignRun>& runs) {
  CampaignSummary c;
  if (runs.empty()) return c;
  c.seeds = runs.size() - 1;
  c.baseline_ok = runs[0].findings.empty();
  if (runs[0].result) c.baseline_attainment = attainment(scenario, *runs[0].result);
  c.worst_attainment = 1;
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const double a = runs[i].result ? attainment(scenario, *runs[i].result) : 0;
    c.mean_attainment += a / static_cast<double>(c.seeds);
    c.worst_attainment = std::min(c.worst_attainment, a);
    c.unhandled += runs[i].findings.empty() ? 0 : 1;
    if (runs[i].result) c.lost += lost_of(*runs[i].result);
  }
  if (c.seeds == 0) c.worst_attainment = c.baseline_attainment;
  return c;
}

std::string campaign_markdown(const Scenario& scenario, const std::vector<CampaignRun>& runs) {
  std::string md = "# Fault campaign: " + scenario.origin + "\n\n" + scenario.question + "\n\n";
  const char* what = scenario.serving ? "SLOs met" : "requests ok";
  md += std::string("| run | faults | lost | retries | relinks | recomputed | ") + what +
        " | TTFT p99 | verdict |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const CampaignRun& run : runs) {
    std::string faults;
    for (const DrawnFault& f : run.faults) faults += (faults.empty() ? "" : "; ") + f.describe();
    if (!run.seed) faults = "none";
    md += "| " + run_name(run) + " | " + faults + " | ";
    if (run.result) {
      md += std::to_string(lost_of(*run.result)) + " | " + std::to_string(retries_of(*run.result)) +
            " | " + std::to_string(run.result->relinks) + " | " +
            std::to_string(recomputes_of(*run.result)) + " | " +
            percent(attainment(scenario, *run.result)) + " | " + millis(ttft_p99_us(*run.result)) +
            " | ";
    } else {
      md += "- | - | - | - | - | - | ";
    }
    md += run.findings.empty() ? "handled" : "UNHANDLED";
    md += " |\n";
  }
  std::string details;
  for (const CampaignRun& run : runs) {
    for (const std::string& f : run.findings) details += "- " + run_name(run) + ": " + f + "\n";
  }
  if (!details.empty()) {
    std::string replay = "kvsim run " + scenario.origin;
    for (const auto& [key, value] : scenario.set) replay += " --set '" + key + "=" + value + "'";
    md += "\nWhat was not handled (replay one seed with `" + replay + " --faults SEED`):\n\n" +
          details;
  }
  return md;
}

std::string campaign_json(const Scenario& scenario, const std::vector<CampaignRun>& runs) {
  nlohmann::ordered_json j;
  j["scenario"] = scenario.origin;
  j["serving"] = scenario.serving.has_value();
  auto& list = j["runs"] = nlohmann::ordered_json::array();
  std::size_t unhandled = 0;
  for (const CampaignRun& run : runs) {
    nlohmann::ordered_json r;
    r["name"] = run_name(run);
    r["seed"] = run.seed ? nlohmann::ordered_json(*run.seed) : nlohmann::ordered_json(nullptr);
    auto& faults = r["faults"] = nlohmann::ordered_json::array();
    for (const DrawnFault& f : run.faults) {
      faults.push_back({{"kind", to_string(f.kind)},
                        {"target", f.target},
                        {"links", f.links},
                        {"at_s", model::to_seconds(f.at)},
                        {"until_s", f.until ? nlohmann::ordered_json(model::to_seconds(f.until))
                                            : nlohmann::ordered_json(nullptr)},
                        {"factor", f.factor},
                        {"description", f.describe()}});
    }
    if (run.result) {
      r["requests"] = run.result->requests.size();
      r["lost"] = lost_of(*run.result);
      r["retries"] = retries_of(*run.result);
      r["relinks"] = run.result->relinks;
      r["recomputes"] = recomputes_of(*run.result);
      r["restarts"] = run.result->restarts;
      r["attainment"] = attainment(scenario, *run.result);
      r["ttft_p99_us"] = ttft_p99_us(*run.result);
    }
    r["findings"] = run.findings;
    r["handled"] = run.findings.empty();
    if (run.seed && !run.findings.empty()) ++unhandled;
    list.push_back(std::move(r));
  }
  j["seeds"] = runs.empty() ? 0 : runs.size() - 1;
  j["unhandled"] = unhandled;
  return j.dump(1);
}

}  // namespace kvsim::sim
