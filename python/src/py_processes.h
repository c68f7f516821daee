// kvsim._core's side of launched programs (kvsim launch): the world's host process for each OS
// process, finalizing or abandoning a process's engines when it ends, and the report of who waits
// on what when a launch stalls. Touches the current world's platform and its LLMDataDists only.
#pragma once

#include <pybind11/pybind11.h>

namespace kvsim::python {

/// Adds World.add_process / process / blocked_jobs / request_stop / finalize_process /
/// abandon_process to the module.
void bind_processes(pybind11::module_& m);

}  // namespace kvsim::python
