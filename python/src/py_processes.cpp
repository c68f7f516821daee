#include "python/src/py_processes.h"

#include <pybind11/stl.h>

#include <stdexcept>

#include "impl/errors.h"
#include "python/src/py_world.h"

namespace kvsim::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

/// Ends (finalizes or abandons) the initialized LLMDataDists of host process `process` and lets
/// the world forget them; returns how many.
template <class End>
int end_dists_of(WorldBox& b, int process, End end) {
  std::vector<DataDistHandle*> ended;
  for (DataDistHandle* d : b.dists) {
    if (d->initialized() && d->get().core()->process() == process) {
      end(d->get());
      ended.push_back(d);
    }
  }
  for (DataDistHandle* d : ended) b.initialized.erase(d);  // may delete the object
  return static_cast<int>(ended.size());
}

}  // namespace

void bind_processes(py::module_& m) {
  auto world =
      py::reinterpret_borrow<py::class_<WorldBox, std::shared_ptr<WorldBox>>>(m.attr("World"));
  world
      .def(
          "add_process",
          [](std::shared_ptr<WorldBox> b, const std::string& name, int node,
             std::vector<int> visible_devices) {
            try {
              return live(b).platform().add_process({name, node, std::move(visible_devices)});
            } catch (const std::invalid_argument& e) {
              throw impl::ValueError("process", e.what());
            }
          },
          "name"_a, "node"_a, "visible_devices"_a,
          "Adds a host process on `node` that sees `visible_devices` (world ids, by logical id); "
          "returns its id (1, 2, ...).")
      .def(
          "process",
          [](std::shared_ptr<WorldBox> b, int id) {
            try {
              const sim::HostProcess& p = live(b).platform().process(id);
              return py::dict("name"_a = p.name, "node"_a = p.node,
                              "visible_devices"_a = p.visible_devices);
            } catch (const std::out_of_range& e) {
              throw impl::ValueError("process", e.what());
            }
          },
          "id"_a)
      .def(
          "blocked_jobs",
          [](std::shared_ptr<WorldBox> b) {
            const std::map<std::string, std::string> stacks = suspended_python_stacks();
            py::list out;
            for (const auto& job : live(b).platform().blocked_jobs()) {
              const auto it = stacks.find(job.job);
              out.append(py::dict("job"_a = job.job, "process"_a = job.process, "what"_a = job.what,
                                  "since_ps"_a = job.since,
                                  "stack"_a = it == stacks.end() ? std::string() : it->second));
            }
            return out;
          },
          "Every suspended job: name, host process, what it waits for, since when, and its "
          "Python stack if it is inside Python.")
      .def(
          "request_stop", [](std::shared_ptr<WorldBox> b) { live(b).platform().request_stop(); },
          "Makes run_until_idle return at its next step (a launcher's wall-clock limit).")
      .def(
          "finalize_process",
          [](std::shared_ptr<WorldBox> b, int process) {
            live(b);
            return end_dists_of(*b, process, [](impl::LLMDataDist& d) { d.finalize(); });
          },
          "process"_a,
          "Finalizes the initialized LLMDataDists of a host process (the library's atexit "
          "handler); returns how many.")
      .def(
          "abandon_process",
          [](std::shared_ptr<WorldBox> b, int process, const std::string& why) {
            live(b);
            return end_dists_of(*b, process, [&why](impl::LLMDataDist& d) { d.abandon(why); });
          },
          "process"_a, "why"_a,
          "Abandons the initialized LLMDataDists of a host process whose OS process ended: its "
          "peers learn of it as of a dead process. Returns how many.");
}

}  // namespace kvsim::python
