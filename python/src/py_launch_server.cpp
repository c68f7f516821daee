#include "python/src/py_launch_server.h"

#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>

#include "cpp/server/launch_server.h"
#include "impl/errors.h"
#include "python/src/py_world.h"

namespace kvsim::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// The server with the world it serves, so that the world outlives it.
struct ServerBox {
  std::shared_ptr<WorldBox> world;
  std::unique_ptr<cpp::LaunchServer> server;
};

// `fn(process, bytes)` as a LaunchServer hook run on a job: its bytes (or str) result;
// std::runtime_error (with the Python error's text) if it raised.
std::string call_hook(const std::shared_ptr<PyRef>& fn, int process, const std::string& request,
                      const char* what) {
  PythonEntry entry;
  PyObject* number = PyLong_FromLong(process);
  PyObject* bytes =
      PyBytes_FromStringAndSize(request.data(), static_cast<Py_ssize_t>(request.size()));
  PyObject* r = number != nullptr && bytes != nullptr
                    ? PyObject_CallFunctionObjArgs(fn->get(), number, bytes, nullptr)
                    : nullptr;
  Py_XDECREF(number);
  Py_XDECREF(bytes);
  if (r == nullptr) {
    throw std::runtime_error(
        take_python_error(std::string("Exception in kvsim launch's ") + what + ":"));
  }
  std::string out;
  if (PyBytes_Check(r)) {
    out.assign(PyBytes_AS_STRING(r), static_cast<std::size_t>(PyBytes_GET_SIZE(r)));
  } else if (PyUnicode_Check(r)) {
    Py_ssize_t n = 0;
    const char* text = PyUnicode_AsUTF8AndSize(r, &n);
    if (text != nullptr) out.assign(text, static_cast<std::size_t>(n));
  }
  Py_DECREF(r);
  return out;
}

}  // namespace

void bind_launch_server(py::module_& m) {
  py::class_<ServerBox>(m, "LaunchServer",
                        "Serves launched OS processes (C++ programs) in a world: their ACL, "
                        "llm_datadist, sleep, clock and TCP calls, in simulated time.")
      .def(py::init([](std::shared_ptr<WorldBox> world, const std::string& output_dir,
                       double wall_limit_s, py::object python_calls, std::uint64_t schedule_seed) {
             sim::World& w = live(world);
             cpp::LaunchServer::Options options;
             options.output_dir = output_dir;
             options.wall_limit_s = wall_limit_s;
             options.schedule_seed = schedule_seed;
             options.interrupted = [] { return PyErr_CheckSignals() != 0; };
             if (!python_calls.is_none()) {
               auto call = std::make_shared<PyRef>(python_calls.attr("call"));
               auto ended = std::make_shared<PyRef>(python_calls.attr("ended"));
               options.python_call = [call](int process, const std::string& request) {
                 return call_hook(call, process, request, "Python call server");
               };
               options.python_ended = [ended](int process, const std::string& why) {
                 try {
                   (void)call_hook(ended, process, why, "Python process end");
                 } catch (const std::runtime_error&) {  // printed; the launch goes on
                 }
               };
             }
             auto box = std::make_unique<ServerBox>();
             box->world = std::move(world);
             box->server = std::make_unique<cpp::LaunchServer>(w.platform(), w.directory(),
                                                               std::move(options));
             return box;
           }),
           "world"_a, "output_dir"_a = "", "wall_limit_s"_a = 600.0, "python_calls"_a = py::none(),
           "schedule_seed"_a = 0,
           "python_calls: serves Python programs' llm_datadist calls, an object with "
           "call(process, bytes) -> bytes and ended(process, why) "
           "(kvsim.launch.python_calls.PythonCalls). schedule_seed: which of a process's ready "
           "threads runs next (0: the oldest).")
      .def(
          "add",
          [](ServerBox& b, const std::string& name, int process, std::vector<std::string> argv,
             std::vector<std::string> env, const std::string& cwd) {
            live(b.world);
            try {
              b.server->add({name, process, std::move(argv), std::move(env), cwd});
            } catch (const std::invalid_argument& e) {
              throw impl::ValueError("argv", e.what());
            } catch (const std::out_of_range& e) {
              throw impl::ValueError("process", e.what());
            }
          },
          "name"_a, "process"_a, "argv"_a, "env"_a, "cwd"_a,
          "Adds a program: its host process in the world, command, complete environment "
          "(NAME=VALUE) and working directory.")
      .def(
          "kill_at",
          [](ServerBox& b, const std::string& name, std::uint64_t at_ps) {
            live(b.world);
            try {
              b.server->kill_at(name, at_ps);
            } catch (const std::invalid_argument& e) {
              throw impl::ValueError("name", e.what());
            }
          },
          "name"_a, "at_ps"_a,
          "Kills program `name` with SIGKILL at simulated time `at_ps` (before run, or from the "
          "call hook).")
      .def(
          "set_call_hook",
          [](ServerBox& b, py::object hook) {
            live(b.world);
            if (hook.is_none()) {
              b.server->set_call_hook(nullptr);
              return;
            }
            auto fn = std::make_shared<PyRef>(hook);
            b.server->set_call_hook([fn](const std::string& program, const std::string& call) {
              PythonEntry entry;
              PyObject* r = PyObject_CallFunction(fn->get(), "ss", program.c_str(), call.c_str());
              if (r == nullptr) {
                throw std::runtime_error(
                    take_python_error("Exception in kvsim launch's call hook:"));
              }
              Py_DECREF(r);
            });
          },
          "hook"_a,
          "Calls hook(program, call) on the driver as each llm_datadist call of a program is "
          "dispatched (call: init, link_clusters, register, pull_cache, pull_blocks, push_cache, "
          "push_blocks, unlink_clusters, finalize, ...): a fault campaign's lifecycle trigger. "
          "None removes it.")
      .def(
          "run",
          [](ServerBox& b) {
            live(b.world);
            const bool clean = b.server->run();
            if (PyErr_Occurred()) throw py::error_already_set();
            return clean;
          },
          "Starts the programs and serves them until all have ended (True), or none can go on "
          "or the wall-clock limit passes (False).")
      .def(
          "ends",
          [](ServerBox& b) {
            py::list out;
            for (const cpp::ProgramEnd& e : b.server->ends()) {
              out.append(py::dict("name"_a = e.name, "exit_code"_a = e.exit_code,
                                  "ended_ps"_a = e.ended_ps, "waiting"_a = e.waiting));
            }
            return out;
          },
          "How each program ended: name, exit_code (None: never), ended_ps, waiting.")
      .def(
          "stall_report", [](ServerBox& b) { return b.server->stall_report(); },
          "Why run() stopped early, with who waits on what ('' after a clean run).");
  m.attr("native_build_dir") = KVSIM_NATIVE_BUILD_DIR;
  m.attr("python_install_dir") = KVSIM_PYTHON_INSTALL_DIR_REL;
}

}  // namespace kvsim::python
