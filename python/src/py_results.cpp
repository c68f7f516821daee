#include "python/src/py_results.h"

#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "impl/errors.h"
#include "model/preset.h"
#include "model/units.h"
#include "python/src/py_world.h"
#include "sim/result_codec.h"
#include "sim/results_writer.h"
#include "sim/sweep.h"

#ifndef KVSIM_SOURCE_DIR
#define KVSIM_SOURCE_DIR "."
#endif

namespace py = pybind11;
using namespace pybind11::literals;

namespace kvsim::python {
namespace {

// {"path": ...} or {"text": ..., "origin": ..., "base_dir": ...}.
sim::ScenarioSource to_source(const py::dict& d) {
  sim::ScenarioSource s;
  if (d.contains("path")) s.path = d["path"].cast<std::string>();
  if (d.contains("text")) s.text = d["text"].cast<std::string>();
  if (d.contains("origin")) s.origin = d["origin"].cast<std::string>();
  if (d.contains("base_dir")) s.base_dir = d["base_dir"].cast<std::string>();
  return s;
}

}  // namespace

void bind_results(py::module_& m) {
  py::class_<sim::RunResult>(m, "RunResult", "One simulated scenario's results (sim::RunResult).")
      .def_property_readonly("json", &sim::result_json,
                             "result.json's text, as `kvsim run` writes it.")
      .def_property_readonly("summary", &sim::summary_text, "summary.txt's text.")
      .def_property_readonly("trace_json", [](const sim::RunResult& r) { return r.trace_json; })
      .def_property_readonly("exit_code", &sim::result_status,
                             "0 if every request succeeded with its bytes verified, else 1.")
      .def_property_readonly(
          "figures",
          [](const sim::RunResult& r) {
            const sim::SweepRow row = sim::sweep_row(r);
            py::dict d(
                "requests"_a = r.requests.size(), "mean_exposed_us"_a = row.mean_exposed_us,
                "mean_ttft_us"_a = row.mean_ttft_us, "exposed_share_pct"_a = row.exposed_share_pct,
                "kv_bytes_per_request"_a = row.kv_bytes_per_request,
                "effective_gbps"_a = row.effective_gbps, "line_rate_gbps"_a = row.line_rate_gbps,
                "ttft_p50_us"_a = row.ttft_p50_us, "ttft_p99_us"_a = row.ttft_p99_us,
                "kv_ready_p99_us"_a = row.kv_ready_p99_us, "exposed_p99_us"_a = row.exposed_p99_us);
            if (row.slo_attainment) {
              d["slo_attainment"] = *row.slo_attainment;
              d["goodput_rps"] = *row.goodput_rps;
            }
            return d;
          },
          "The per-point figures of sweep.csv.")
      .def_property_readonly(
          "compute",
          [](const sim::RunResult& r) {
            py::list out;
            for (const sim::ComputeSpan& c : r.compute) {
              out.append(py::make_tuple(c.request, c.layer, c.start, c.end));
            }
            return out;
          },
          "Prefill layer spans: (request, layer, start_ps, end_ps).")
      .def("write", &sim::write_results, "dir"_a,
           "Writes the files of `kvsim run` (no plots) into dir.");

  py::class_<sim::PointOutcome>(m, "Point", "One simulated point of a study.")
      .def_readonly("overrides", &sim::PointOutcome::overrides)
      .def_property_readonly(
          "result",
          [](const sim::PointOutcome& p) -> const sim::RunResult* {
            return p.result ? &*p.result : nullptr;
          },
          py::return_value_policy::reference_internal)
      .def_readonly("error", &sim::PointOutcome::error)
      .def_readonly("exit_code", &sim::PointOutcome::exit_code);

  m.def(
      "_run_points",
      [](const py::dict& source, const std::vector<std::vector<sim::ScenarioOverride>>& points,
         int jobs, bool trace, py::object progress, py::object request_progress) {
        if (running_on_job()) {
          throw impl::RuntimeError("kvsim.run", "cannot be called by a simulated job");
        }
        sim::PointRunOptions o;
        o.jobs = jobs;
        o.trace = trace;
        if (!progress.is_none()) {
          o.progress = [progress](std::size_t done, std::size_t total) { progress(done, total); };
        }
        if (!request_progress.is_none()) {
          o.request_progress = [request_progress](std::size_t point, std::size_t done,
                                                  std::size_t total) {
            request_progress(point, done, total);
          };
        }
        o.interrupted = [] {
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        };
        return sim::run_points(to_source(source), points, o);
      },
      "source"_a, "points"_a, "jobs"_a, "trace"_a, "progress"_a, "request_progress"_a,
      "Simulates each point in a forked child process; the current world is left as it is.");
  // Points that cross machines (Dask workers) travel as (exit_code, error, encoded result): the
  // codec the forked children already use, so a remote point decodes to the bits of a local one.
  m.def(
      "_encode_point",
      [](const sim::PointOutcome& p) {
        return py::make_tuple(p.exit_code, p.error,
                              p.result ? py::object(py::bytes(sim::encode_result(*p.result)))
                                       : py::object(py::none()));
      },
      "point"_a, "(exit_code, error, bytes or None) of a simulated point.");
  m.def(
      "_decode_point",
      [](const py::dict& source, const std::vector<sim::ScenarioOverride>& overrides, int exit_code,
         const std::string& error, const py::object& bytes) {
        sim::PointOutcome p;
        p.overrides = overrides;
        p.scenario = to_source(source).load(overrides);
        p.exit_code = exit_code;
        p.error = error;
        if (!bytes.is_none()) {
          p.result = sim::decode_result(bytes.cast<std::string>(), p.scenario);
        }
        return p;
      },
      "source"_a, "overrides"_a, "exit_code"_a, "error"_a, "bytes"_a,
      "The point _encode_point described, its scenario parsed here from source and overrides.");
  m.def(
      "_parse_points",
      [](const py::dict& source, const std::vector<std::vector<sim::ScenarioOverride>>& points) {
        const sim::ScenarioSource src = to_source(source);
        for (const auto& overrides : points) (void)src.load(overrides);
      },
      "source"_a, "points"_a,
      "Parses every point (as run_points does first); raises on the first bad one.");
  m.def(
      "_scenario_sweep", [](const py::dict& source) { return to_source(source).load({}).sweep; },
      "source"_a, "The scenario's own sweep: section as [(key, [values])].");
  m.def(
      "_sweep_csv",
      [](const std::vector<std::pair<std::string, std::vector<std::string>>>& axes,
         const std::vector<sim::PointOutcome>& points) {
        std::vector<sim::SweepAxis> a;
        for (const auto& [key, values] : axes) a.push_back({key, values});
        return sim::sweep_csv(a, points);
      },
      "axes"_a, "points"_a);
  m.def(
      "_cross_product",
      [](const std::vector<std::pair<std::string, std::vector<std::string>>>& axes) {
        std::vector<sim::SweepAxis> a;
        for (const auto& [key, values] : axes) a.push_back({key, values});
        return sim::cross_product(a);
      },
      "axes"_a);
  m.def(
      "_uncertain",
      [](const py::dict& source, const std::vector<sim::ScenarioOverride>& overrides) {
        const sim::Scenario s = to_source(source).load(overrides);
        const model::TopologySpec spec = model::load_preset(s.preset, s.hardware_overrides);
        auto starts = [](const std::string& key, const std::string& prefix) {
          return key.compare(0, prefix.size(), prefix) == 0;
        };
        py::list out;
        for (const model::UncertainParameter& p : spec.uncertain) {
          bool pinned = false;
          for (const auto& o : s.hardware_overrides) pinned = pinned || o.first == p.key;
          // Values that cannot move this scenario's answer: compute when it prices prefill
          // itself, another transfer path's costs.
          pinned = pinned || (starts(p.key, "compute.") && !s.prefill_from_preset) ||
                   (starts(p.key, "paths.") && !starts(p.key, "paths." + spec.path + "."));
          out.append(py::dict("key"_a = p.key, "override"_a = "hardware." + p.key,
                              "value"_a = p.value, "low"_a = p.low, "high"_a = p.high,
                              "source"_a = p.source, "fitted_to"_a = p.fitted_to,
                              "integer"_a = p.integer, "pinned"_a = pinned, "preset"_a = s.preset));
        }
        // The engine profile's costs, where the scenario names an engine and leaves them free.
        const sim::EngineProfile profile = sim::load_engine(s.engine.name);
        const auto mine = s.engine.costs(), theirs = profile.costs();
        for (const model::UncertainParameter& p : profile.uncertain) {
          bool pinned = false;  // the scenario sets the cost itself
          for (std::size_t i = 0; i < mine.size(); ++i)
            pinned = pinned || (p.key == mine[i].first && *mine[i].second != *theirs[i].second);
          out.append(py::dict("key"_a = "serving." + p.key, "override"_a = "serving." + p.key,
                              "value"_a = p.value, "low"_a = p.low, "high"_a = p.high,
                              "source"_a = p.source, "fitted_to"_a = p.fitted_to,
                              "integer"_a = false, "pinned"_a = pinned, "preset"_a = s.preset,
                              "engine"_a = s.engine.name));
        }
        return out;
      },
      "source"_a, "overrides"_a,
      "The scenario's preset's uncertain parameters, then its engine profile's (override: the "
      "scenario key that sets one); pinned: the scenario sets the key itself, or the key cannot "
      "change its answer (compute when it gives its own prefill, another path).");
  m.def(
      "_layer_costs",
      [](const py::dict& source, const std::vector<std::vector<sim::ScenarioOverride>>& points) {
        py::list out;
        for (const auto& overrides : points) {
          const sim::Scenario s = to_source(source).load(overrides);
          if (s.requests.empty()) throw std::invalid_argument("the scenario has no request");
          const sim::LayerCost c = s.compute.prefill_layer(s.model, s.requests[0].prompt_tokens,
                                                           s.tensor_parallel, s.dtype_bytes);
          out.append(py::dict("gemm"_a = c.gemm, "weights"_a = c.weights,
                              "elementwise"_a = c.elementwise, "attention"_a = c.attention,
                              "allreduce"_a = c.allreduce, "overhead"_a = c.overhead,
                              "total"_a = c.total()));
        }
        return out;
      },
      "source"_a, "points"_a,
      "One prefill layer's cost on one rank by part (seconds), for the first request's prompt of "
      "each point, from the preset's compute model (no simulation).");
  m.def(
      "_quantity",
      [](const std::string& text) {
        static const char* const kinds[] = {"number", "time", "bandwidth", "bytes"};
        const model::Quantity q = model::parse_quantity(text);
        return py::make_tuple(kinds[static_cast<int>(q.kind)], q.value);
      },
      "text"_a, "(kind, value in ps, B/s or bytes) of a preset value.");
  m.def("_split_values", &sim::split_values, "list"_a);
  m.def("_progress_bar", &sim::progress_bar, "done"_a, "total"_a);
  m.attr("_source_dir") = KVSIM_SOURCE_DIR;
}

}  // namespace kvsim::python
