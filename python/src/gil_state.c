/* PyGILState_Ensure (used by C extensions such as torch and by pybind11 modules) finds the calling
 * OS thread's thread state in a TSS slot that CPython fills once per OS thread. Simulated jobs run
 * on the script's OS thread with thread states of their own, so the slot must follow every switch
 * of thread state, or an extension called from a job waits forever for the script's state.
 * CPython 3.11 has no public setter: this file reads the runtime's gilstate through an internal
 * header, which is C only. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_runtime.h>

#include "python/src/gil_state.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "gil_state.c reads CPython 3.11's _PyRuntime.gilstate; check its layout for this version"
#endif

void kvsim_set_gilstate_thread_state(PyThreadState* state) {
  PyThread_tss_set(&_PyRuntime.gilstate.autoTSSkey, state);
}
