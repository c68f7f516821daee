#include "python/src/py_world.h"

#include <cstdlib>
#include <map>
#include <stdexcept>

#include "impl/errors.h"
#include "python/src/gil_state.h"

namespace kvsim::python {
namespace {

// Leaked on purpose: static destructors run after the interpreter is gone.
std::shared_ptr<WorldBox>* g_world = new std::shared_ptr<WorldBox>();
// A job that is inside Python: its thread state, and what to restore when it leaves.
struct JobContext {
  PyThreadState* driver = nullptr;  // the thread state the kernel was entered with
  void* driver_tls = nullptr;       // pybind11's thread-state TLS value for it
  void* base_frames = nullptr;      // pybind11's call-frame stack top when the job entered
  void* own_frames = nullptr;       // the job's own stack top while it is suspended
  std::string job;                  // the job's SystemC name (stall reports)
};
// Jobs inside Python (running or suspended), by their thread state.
std::map<PyThreadState*, JobContext>* g_jobs = new std::map<PyThreadState*, JobContext>();

// pybind11 keeps two per-thread values that a coroutine must not share with other stacks: the
// thread state gil_scoped_acquire (used by error_already_set) looks up, and the stack of call
// frames (loader_life_support) of bound functions in progress.
void set_pybind_tls(void* value) {
  PYBIND11_TLS_REPLACE_VALUE(py::detail::get_internals().tstate, value);
}
void* pybind_tls() {
  return PYBIND11_TLS_GET_VALUE(py::detail::get_internals().tstate);
}
#if PYBIND11_INTERNALS_VERSION == 4
PYBIND11_TLS_KEY_REF frames_key() {
  return py::detail::get_local_internals().loader_life_support_tls_key;
}
#else
PYBIND11_TLS_KEY_REF frames_key() {
  return py::detail::get_internals().loader_life_support_tls_key;
}
#endif
void* frames_top() {
  return PYBIND11_TLS_GET_VALUE(frames_key());
}
void set_frames_top(void* value) {
  PYBIND11_TLS_REPLACE_VALUE(frames_key(), value);
}

bool on_job() {
  const std::shared_ptr<WorldBox>& box = *g_world;
  return box && box->alive && box->world->platform().on_job();
}

}  // namespace

std::shared_ptr<WorldBox> make_world(const std::string& preset,
                                     const std::vector<model::Override>& overrides,
                                     const std::string& scenario,
                                     const sim::AddressPlan& addresses) {
  if (on_job()) throw impl::RuntimeError("kvsim.World", "cannot be made by a simulated job");
  if (const std::shared_ptr<WorldBox>& old = *g_world) {
    for (DataDistHandle* d : old->dists) {
      if (d->initialized()) {
        throw impl::RuntimeError("kvsim.World",
                                 "an LLMDataDist of the current world (cluster " +
                                     std::to_string(d->get().cluster_id()) +
                                     ") is initialized; finalize it before replacing the world");
      }
    }
    shutdown_world();
  }
  auto box = std::make_shared<WorldBox>();
  box->world = std::make_unique<sim::World>(preset, overrides, addresses);
  box->preset = preset;
  box->scenario = scenario;
  install_switch_hooks(box->world->platform());
  *g_world = box;
  return box;
}

std::shared_ptr<WorldBox> current_world() {
  if (!*g_world) {
    const char* env = std::getenv("KVSIM_PRESET");
    make_world(env != nullptr && *env != '\0' ? env : "atlas-a2", {}, "");
  }
  return *g_world;
}

void shutdown_world() {
  std::shared_ptr<WorldBox> box = std::move(*g_world);
  g_world->reset();
  if (!box) return;
  box->initialized.clear();
  for (DataDistHandle* d : box->dists) d->detach();
  box->alive = false;
  // Jobs still suspended in the old kernel are abandoned with it (never resumed).
  box->world.reset();
}

sim::World& live(const std::shared_ptr<WorldBox>& box) {
  if (!box) throw impl::RuntimeError("kvsim", "no kvsim.World");
  return live_box(*box);
}

sim::World& live_box(WorldBox& box) {
  if (!box.alive) {
    throw impl::RuntimeError("kvsim", "this object belongs to a kvsim.World that was replaced");
  }
  return *box.world;
}

DataDistHandle::DataDistHandle(impl::LLMRole role, std::uint64_t cluster_id)
    : box_(current_world()) {
  sim::World& w = live(box_);
  dist_ = std::make_unique<impl::LLMDataDist>(w.platform(), w.directory(), role, cluster_id);
  box_->dists.insert(this);
}

DataDistHandle::~DataDistHandle() {
  box_->dists.erase(this);
  if (box_->alive) dist_.reset();  // leaves the world (links dropped on both sides)
}

impl::LLMDataDist& DataDistHandle::get() {
  live(box_);
  return *dist_;
}

PythonEntry::PythonEntry() {
  if (!on_job()) return;
  PyThreadState* cur = PyThreadState_Get();
  if (g_jobs->count(cur) != 0) return;  // already in this job's state (nested call)
  const std::shared_ptr<WorldBox>& box = *g_world;
  JobContext ctx{cur, pybind_tls(), frames_top(), nullptr, box->world->platform().current_job()};
  own_ = PyThreadState_New(cur->interp);
  own_->gilstate_counter = 1;  // owned here, never by a gil_scoped_acquire
  g_jobs->emplace(own_, ctx);
  PyThreadState_Swap(own_);
  kvsim_set_gilstate_thread_state(own_);
  set_pybind_tls(own_);
}

PythonEntry::~PythonEntry() {
  if (own_ == nullptr) return;
  const JobContext ctx = g_jobs->at(own_);
  PyThreadState_Clear(own_);
  PyThreadState_Swap(ctx.driver);
  kvsim_set_gilstate_thread_state(ctx.driver);
  set_pybind_tls(ctx.driver_tls);
  set_frames_top(ctx.base_frames);
  g_jobs->erase(own_);
  PyThreadState_Delete(own_);
}

void install_switch_hooks(sim::SystemcPlatform& platform) {
  sim::SystemcPlatform::JobSwitchHooks hooks;
  hooks.leave = []() -> void* {
    PyThreadState* cur = _PyThreadState_UncheckedGet();
    const auto it = cur == nullptr ? g_jobs->end() : g_jobs->find(cur);
    if (it == g_jobs->end()) return nullptr;
    JobContext& ctx = it->second;
    ctx.own_frames = frames_top();
    set_frames_top(ctx.base_frames);
    PyThreadState_Swap(ctx.driver);
    kvsim_set_gilstate_thread_state(ctx.driver);
    set_pybind_tls(ctx.driver_tls);
    return cur;
  };
  hooks.enter = [](void* token) {
    if (token == nullptr) return;
    auto* state = static_cast<PyThreadState*>(token);
    PyThreadState_Swap(state);
    kvsim_set_gilstate_thread_state(state);
    set_pybind_tls(state);
    set_frames_top(g_jobs->at(state).own_frames);
  };
  platform.set_job_switch_hooks(std::move(hooks));
}

std::map<std::string, std::string> suspended_python_stacks() {
  std::map<std::string, std::string> out;
  py::module_ traceback = py::module_::import("traceback");
  for (const auto& [state, ctx] : *g_jobs) {
    PyFrameObject* frame = PyThreadState_GetFrame(state);
    if (frame == nullptr) continue;
    py::object f = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(frame));
    std::string text;
    for (py::handle line : traceback.attr("format_stack")(f)) text += line.cast<std::string>();
    out[ctx.job] = text;
  }
  return out;
}

bool running_on_job() {
  return on_job();
}

std::string take_python_error(const std::string& header, py::object* value_out) {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  std::string what = "unknown Python error";
  if (type != nullptr) {
    py::object t = py::reinterpret_steal<py::object>(type);
    py::object v = py::reinterpret_steal<py::object>(value);
    py::object trace = py::reinterpret_steal<py::object>(tb);
    what = py::str(t.attr("__name__")).cast<std::string>();
    if (value_out != nullptr) *value_out = v;
    if (v) {
      const std::string msg = py::str(v).cast<std::string>();
      if (!msg.empty()) what += ": " + msg;
    }
    try {
      py::module_ sys = py::module_::import("sys");
      py::module_ traceback = py::module_::import("traceback");
      py::object err = sys.attr("stderr");
      if (!err.is_none()) {
        err.attr("write")(header + "\n");
        traceback.attr("print_exception")(t, v, trace, py::arg("file") = err);
      }
    } catch (const py::error_already_set&) {
      PyErr_Clear();
    }
  }
  return what;
}

PyRef::~PyRef() {
  if (obj_ != nullptr && Py_IsInitialized() && _PyThreadState_UncheckedGet() != nullptr) {
    Py_DECREF(obj_);
  }
}

}  // namespace kvsim::python
