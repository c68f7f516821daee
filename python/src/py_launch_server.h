// kvsim._core's side of launched OS processes (C++ programs under kvsim launch): the world's
// LaunchServer (cpp/server/launch_server.h) for the Python launcher.
#pragma once

#include <pybind11/pybind11.h>

namespace kvsim::python {

/// Adds LaunchServer and native_lib_dirs to the module.
void bind_launch_server(pybind11::module_& m);

}  // namespace kvsim::python
