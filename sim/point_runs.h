// Scenario points simulated in forked child processes: each child gets a fresh SystemC kernel, so
// a point runs exactly as it would alone (and as `kvsim run` runs it), and sends its RunResult back
// over a pipe. Used by `kvsim sweep` and the Python kvsim.run / kvsim.sweep.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace kvsim::sim {

/// Where a scenario comes from: a file (`path`), else `text` named `origin` in errors.
struct ScenarioSource {
  std::string path;
  std::string text;
  std::string origin = "<text>";
  std::string base_dir = ".";  ///< resolves relative trace paths of `text`

  /// The scenario with `overrides` applied. Throws model::ModelError naming file, line and key.
  Scenario load(const std::vector<ScenarioOverride>& overrides) const;
};

/// What became of one point.
struct PointOutcome {
  std::vector<ScenarioOverride> overrides;
  Scenario scenario;
  std::optional<RunResult> result;  ///< none if the run failed before it had results
  std::string error;                ///< why there is no result
  int exit_code = 2;                ///< 0 ok; 1 a request failed or its bytes differ; 2 no result
};

/// Options of run_points.
struct PointRunOptions {
  int jobs = 1;        ///< child processes at a time
  bool trace = false;  ///< keep each result's Chrome trace
  /// In the parent, after each point ends: (points done, points).
  std::function<void(std::size_t, std::size_t)> progress;
  /// In the parent, after each request of a point: (point, requests done, requests).
  std::function<void(std::size_t, std::size_t, std::size_t)> request_progress;
  /// In the parent, when a signal interrupts the wait; may throw to stop (the children are then
  /// killed and reaped before the exception goes on).
  std::function<void()> interrupted;
  /// In the parent, as soon as a point has ended (its index in `points`, its outcome): a sweep
  /// writes it at once, so that an interrupted sweep keeps what it finished.
  std::function<void(std::size_t, const PointOutcome&)> on_point;
};

/// Parses every point first (a bad key or value throws model::ModelError before anything runs),
/// then simulates each in a forked child process and returns the outcomes in point order. A World
/// the caller has alive is left as it is.
std::vector<PointOutcome> run_points(const ScenarioSource& source,
                                     const std::vector<std::vector<ScenarioOverride>>& points,
                                     const PointRunOptions& options);

/// 0 if every request succeeded with its bytes verified, else 1 (the exit code of `kvsim run`).
int result_status(const RunResult& result);

}  // namespace kvsim::sim
