// kvsim._core's study runner: scenario points simulated in forked child processes
// (sim/point_runs.h) and their results (sim::RunResult) as Python objects; the kvsim.results
// module builds on it.
#pragma once

#include <pybind11/pybind11.h>

namespace kvsim::python {

/// Adds RunResult, Point, _run_points, _cross_product, _split_values, _sweep_csv, _progress_bar
/// and _source_dir to the module.
void bind_results(pybind11::module_& m);

}  // namespace kvsim::python
