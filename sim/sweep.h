// A study's points and figures: the cross product of --set value lists (in the order of
// `kvsim sweep`), the per-point figures of sweep.csv and the progress bar. Shared by `kvsim sweep`
// and the Python kvsim.sweep.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sim/point_runs.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace kvsim::sim {

/// One swept key and its values, in order.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

/// The values of a `--set key=v1,v2,...` list: split at commas (a trailing comma adds nothing).
std::vector<std::string> split_values(const std::string& list);
/// The most points a sweep may have (checked before any is built).
inline constexpr std::size_t kMaxSweepPoints = 100'000;
/// The cross product of the axes, the first axis outermost (the order of `kvsim sweep`). Throws
/// std::invalid_argument for an axis without values or more than kMaxSweepPoints points.
std::vector<std::vector<ScenarioOverride>> cross_product(const std::vector<SweepAxis>& axes);

/// The per-point figures of sweep.csv.
struct SweepRow {
  double requests = 0;
  double mean_exposed_us = 0;
  double mean_ttft_us = 0;
  double exposed_share_pct = 0;  ///< summed exposed over summed arrival-to-KV-ready
  double kv_bytes_per_request = 0;
  double effective_gbps = 0;  ///< mean over requests
  double line_rate_gbps = 0;
  double ttft_p50_us = 0;
  double ttft_p99_us = 0;
  double kv_ready_p99_us = 0;
  double exposed_p99_us = 0;
  std::optional<double> slo_attainment;  ///< serving runs only
  std::optional<double> goodput_rps;
};
/// The sweep.csv figures of one result.
SweepRow sweep_row(const RunResult& result);
/// sweep.csv: one column per axis, then the figures, one line per point.
std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<PointOutcome>& points);
/// "  [#########                     ] 3/10 points" (no line end).
std::string progress_bar(std::size_t done, std::size_t total);

}  // namespace kvsim::sim
