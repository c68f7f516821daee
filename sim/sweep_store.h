// A sweep's folder on disk, kept so that a sweep killed at any moment can be resumed: sweep.json
// (the scenario and axes, written first), an INCOMPLETE marker until the end, and per point the
// run's files plus result.cbor (its exact result, written last: a point folder without it is
// incomplete). Every file is written atomically.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sim/point_runs.h"
#include "sim/sweep.h"

namespace kvsim::sim {

/// What a sweep folder says it holds.
struct SweepManifest {
  std::string scenario;  ///< the scenario path as given (results name it so)
  std::string cwd;       ///< the working directory it was given in
  std::vector<SweepAxis> axes;
};

/// Starts a sweep folder: sweep.json and the INCOMPLETE marker (saying how to resume).
void begin_sweep_folder(const std::string& dir, const SweepManifest& manifest);
/// sweep.json of `dir`. Throws std::runtime_error if it is missing, unreadable or of another
/// schema.
SweepManifest read_sweep_manifest(const std::string& dir);
/// Writes point `index`'s files into dir/point-<index>/, result.cbor last.
void write_sweep_point(const std::string& dir, std::size_t index, const PointOutcome& point);
/// The result of a complete point folder, decoded against `scenario`; none if incomplete.
std::optional<RunResult> read_sweep_point(const std::string& dir, std::size_t index,
                                          const Scenario& scenario);
/// Ends a sweep folder: removes the INCOMPLETE marker.
void end_sweep_folder(const std::string& dir);
/// True while dir holds the INCOMPLETE marker.
bool sweep_folder_incomplete(const std::string& dir);

}  // namespace kvsim::sim
