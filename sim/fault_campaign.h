// `kvsim run FILE --faults SEEDS`: the scenario once without faults and once per seed with the
// faults its fault_plan draws for that seed. Each seed gets a verdict (what the run did not
// handle: requests lost, bytes that differ, a stall or an error) and its own result folder; the
// campaign writes fault_campaign.json and fault_campaign.md (SLO attainment with and without
// faults) and returns 0 when every seed's faults were handled.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/fault_plan.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace kvsim::sim {

/// One run of a campaign: the baseline (no seed) or a seed's.
struct CampaignRun {
  std::optional<std::uint64_t> seed;  ///< none: the baseline, without drawn faults
  std::vector<DrawnFault> faults;
  std::vector<std::string> findings;  ///< what was not handled; empty: handled
  std::optional<RunResult> result;    ///< none when the run threw
};

/// The nodes a run of `scenario` uses (its serving instances', or the prompt and decode nodes).
std::vector<int> nodes_in_use(const Scenario& scenario);

/// What `result` shows was not handled: lost requests (not ok), verified bytes that differ.
std::vector<std::string> findings_of(const RunResult& result);

/// Runs the baseline and every seed in order (`progress(done, total)` after each), writing each
/// run's results to out_dir/baseline and out_dir/seed-N. Throws std::invalid_argument when the
/// scenario has no fault_plan: or its nodes have no NIC.
std::vector<CampaignRun> run_fault_campaign(
    const Scenario& scenario, const std::vector<std::uint64_t>& seeds, const std::string& out_dir,
    const std::function<void(std::size_t, std::size_t)>& progress = {});

/// A campaign in numbers (a row of a fault sweep).
struct CampaignSummary {
  std::size_t seeds = 0;
  std::size_t unhandled = 0;       ///< seeds with a finding
  bool baseline_ok = false;        ///< the run without faults had no finding
  double baseline_attainment = 0;  ///< SLOs met (serving) or requests ok, without faults
  double mean_attainment = 0;      ///< the same, averaged over the seeds
  double worst_attainment = 0;     ///< and the seeds' lowest
  std::size_t lost = 0;            ///< requests lost over all seeds
};
CampaignSummary summarise(const Scenario& scenario, const std::vector<CampaignRun>& runs);

/// fault_campaign.md's text: a row per run (faults, lost, retries, relinks, SLO attainment,
/// TTFT p99, verdict) and how to replay a finding.
std::string campaign_markdown(const Scenario& scenario, const std::vector<CampaignRun>& runs);
/// fault_campaign.json's text (what reports/kvsim_report.py plots).
std::string campaign_json(const Scenario& scenario, const std::vector<CampaignRun>& runs);

}  // namespace kvsim::sim
