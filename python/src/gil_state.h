/* The thread state PyGILState_* associate with the calling OS thread (see gil_state.c). */
#pragma once

#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Makes PyGILState_Ensure on this OS thread find `state` (the job or script now running). */
void kvsim_set_gilstate_thread_state(PyThreadState* state);

#ifdef __cplusplus
}
#endif
