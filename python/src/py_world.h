// The Python module's simulated world: the current kvsim.World, the per-job Python thread states
// that let Python code block in simulated time, and the objects that must not outlive a world.
//
// Threading model: everything runs on one OS thread. A SystemC job is a coroutine with its own
// stack; a job that calls into Python gets its own PyThreadState (same interpreter, same OS
// thread), installed while the job runs Python and swapped out around every suspension of the
// job (SystemcPlatform switch hooks), so that CPython frames of different stacks never share a
// thread state. The driver (the script's own code) keeps the GIL while it runs the kernel.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "impl/llm_datadist.h"
#include "sim/world.h"

namespace kvsim::python {

namespace py = pybind11;

class DataDistHandle;

/// One kvsim world; Python objects hold it so that they can tell when it was replaced.
struct WorldBox {
  std::unique_ptr<sim::World> world;
  std::string preset;
  std::string scenario;  ///< scenario file it came from, if any
  bool alive = true;
  std::set<DataDistHandle*> dists;  ///< LLMDataDist objects created in this world
  /// Initialized LLMDataDist objects, kept alive until finalize as the library's class attribute
  /// LLMDataDist.llm_engine_instance keeps its instance (llm_datadist.py init).
  std::map<DataDistHandle*, py::object> initialized;
  /// Simulated mirrors of the program's own host memory, by (address, size) (py_host_memory).
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> host_mirrors;
};

/// The current world, created from $KVSIM_PRESET (default "atlas-a2") if there is none.
std::shared_ptr<WorldBox> current_world();
/// Replaces the current world. RuntimeError while an LLMDataDist of the current one is
/// initialized (finalize it first).
std::shared_ptr<WorldBox> make_world(const std::string& preset,
                                     const std::vector<model::Override>& overrides,
                                     const std::string& scenario,
                                     const sim::AddressPlan& addresses = {});
/// Ends the current world (module exit).
void shutdown_world();
/// RuntimeError unless `box` is still the live world.
sim::World& live(const std::shared_ptr<WorldBox>& box);
/// As live, for a box held by reference.
sim::World& live_box(WorldBox& box);

/// An LLMDataDist bound to the world it was made in.
class DataDistHandle {
 public:
  DataDistHandle(impl::LLMRole role, std::uint64_t cluster_id);
  ~DataDistHandle();
  DataDistHandle(const DataDistHandle&) = delete;
  DataDistHandle& operator=(const DataDistHandle&) = delete;
  /// The engine; RuntimeError if its world was replaced.
  impl::LLMDataDist& get();
  const std::shared_ptr<WorldBox>& box() const { return box_; }
  /// Drops the engine (world teardown; only when not initialized).
  void detach() { dist_.reset(); }
  bool initialized() const { return dist_ && dist_->initialized(); }

 private:
  std::shared_ptr<WorldBox> box_;
  std::unique_ptr<impl::LLMDataDist> dist_;
};

/// Runs a Python call from C++ with a valid thread state for the current context: on a job, the
/// job's own PyThreadState (created for the outermost call, deleted after it). Python errors
/// stay set for the caller to fetch.
class PythonEntry {
 public:
  PythonEntry();
  ~PythonEntry();
  PythonEntry(const PythonEntry&) = delete;
  PythonEntry& operator=(const PythonEntry&) = delete;

 private:
  PyThreadState* own_ = nullptr;
};

/// Installs the thread-state switch hooks on a world's platform.
void install_switch_hooks(sim::SystemcPlatform& platform);

/// The Python stack of every job suspended inside Python, by job name ("File ..., line ..." as
/// traceback.format_stack gives it, innermost last).
std::map<std::string, std::string> suspended_python_stacks();

/// Fetches and clears the current Python error as "Type: message", printing its traceback to
/// stderr under `header` as threading's excepthook does for a dying thread.
std::string take_python_error(const std::string& header, py::object* value_out = nullptr);

/// True while a simulated job (not the script) is running.
bool running_on_job();

/// A Python object reference that is safe to drop from any context, also after interpreter
/// shutdown (then it is leaked).
class PyRef {
 public:
  explicit PyRef(py::handle h) : obj_(h.ptr()) { Py_XINCREF(obj_); }
  ~PyRef();
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  PyObject* get() const { return obj_; }

 private:
  PyObject* obj_;
};

}  // namespace kvsim::python
