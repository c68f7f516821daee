#include "sim/report.h"

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

#ifndef KVSIM_SOURCE_DIR
#define KVSIM_SOURCE_DIR "."
#endif

namespace kvsim::sim {

std::string reports_dir() {
  if (const char* env = std::getenv("KVSIM_REPORTS_DIR")) return env;
  return std::string(KVSIM_SOURCE_DIR) + "/reports";
}

std::vector<std::string> render_report(const std::string& dir) {
  namespace py = pybind11;
  // One interpreter for the life of the process (CPython cannot be re-initialised cleanly).
  static std::unique_ptr<py::scoped_interpreter> interpreter;
  if (!Py_IsInitialized()) interpreter = std::make_unique<py::scoped_interpreter>();
  try {
    py::module_::import("sys").attr("path").attr("insert")(0, reports_dir());
    return py::module_::import("kvsim_report").attr("render")(dir).cast<std::vector<std::string>>();
  } catch (const py::error_already_set& e) {
    throw std::runtime_error("report of '" + dir + "' failed: " + e.what());
  }
}

}  // namespace kvsim::sim
