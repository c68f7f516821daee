// kvsim._core's side of hosted programs (kvsim launch): host processes of the current world, the
// switch of per-process Python context, finalizing a process's engines when it ends, and the
// report of who waits on what when a launch stalls.
#pragma once

#include <pybind11/pybind11.h>

namespace kvsim::python {

/// Adds World.add_process / process / blocked_jobs / request_stop / finalize_process, kill_process,
/// current_process and _set_process_switch to the module.
void bind_hosting(pybind11::module_& m);

}  // namespace kvsim::python
