// Writes a run's results into an output folder: summary.txt (for people), requests.csv,
// links.csv, compute.csv, result.json (for scripts and reports), diagnostics.txt, trace.json.
#pragma once

#include <string>

#include "sim/runner.h"

namespace kvsim::sim {

/// Writes `text` to `path` through a temporary file and a rename, so that a reader (or a crash)
/// never sees half a file. Throws std::runtime_error naming the path.
void write_file_atomic(const std::string& path, const std::string& text);
/// The human summary: one line per request and per busy link, and the headline numbers.
std::string summary_text(const RunResult& result);
/// result.json's content (every number a report needs; times in microseconds).
std::string result_json(const RunResult& result);
/// Writes every result file into `dir` (created if missing). Throws std::runtime_error naming the
/// file that could not be written.
void write_results(const RunResult& result, const std::string& dir);

}  // namespace kvsim::sim
