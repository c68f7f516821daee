"""kvsim: the simulated world behind the llm_datadist module.

A world is one SystemC simulation of a hardware preset. Scripts get the default world
(preset from $KVSIM_PRESET, else "atlas-a2") the first time they make an LLMDataDist, or
choose one with ``kvsim.World(preset, overrides={...})`` or ``kvsim.World(scenario=path)``.
``kvsim.run`` and ``kvsim.sweep`` simulate whole scenarios as the kvsim command does and return
their results (kvsim.results).
"""
import atexit
import os
import threading  # noqa: F401 - first imported by the script's own thread state, not by a job's


def _use_installed_data():
    """An installed package carries presets, models, the scenario library, the validation and
    calibration data, and reports/."""
    here = os.path.dirname(__file__)
    presets = os.path.join(here, "presets")
    if os.path.isdir(presets):
        os.environ["KVSIM_PRESET_PATH"] = os.pathsep.join(
            p for p in (os.environ.get("KVSIM_PRESET_PATH"), presets) if p)
    for var, name in (("KVSIM_MODELS", "models.yaml"), ("KVSIM_SCENARIO_LIBRARY", "library"),
                      ("KVSIM_REPORTS_DIR", "reports"), ("KVSIM_VALIDATION_DIR", "validation"),
                      ("KVSIM_CALIBRATION_DIR", "calibration")):
        path = os.path.join(here, name)
        if var not in os.environ and os.path.exists(path):
            os.environ[var] = path


_use_installed_data()

from kvsim._core import (  # noqa: E402
    Diagnostic, Event, Job, World, alloc, current_world, free, now_ps, read, sleep,
    spawn, write)

from kvsim import _core  # noqa: E402
from kvsim import launched as _launched  # noqa: E402

if _launched.active():  # memory and time are the launch's world's (kvsim.launched)
    from kvsim.launched.remote import (  # noqa: E402,F811
        Event, alloc, current_world, free, now_ps, read, sleep, write)
    from kvsim.launched.remote import unsupported as _unsupported  # noqa: E402
    World, Job, spawn = _unsupported("World"), _unsupported("Job"), _unsupported("spawn")
from kvsim.results import (  # noqa: E402
    Result, Row, Sweep, SweepError, library_dir, reports_dir, run, sweep)

atexit.register(_core._shutdown)

__all__ = ["Diagnostic", "Event", "Job", "Result", "Row", "Sweep", "SweepError", "World", "alloc",
           "current_world", "device_ip", "diagnostics", "free", "host_ip", "node_of", "library_dir", "now", "now_ps",
           "read", "read_array", "reports_dir", "run", "sleep", "spawn", "sweep", "write"]


def now():
    """Simulated time of the current world, in seconds."""
    return now_ps() * 1e-12


def device_ip(device):
    """The NIC address the preset gives a device ("10.0.0.1" for device 0 on atlas-a2)."""
    return current_world().device_ip(device)


def host_ip(node):
    """The host address of a node ("172.16.0.1" for node 0): where its processes listen."""
    return current_world().host_ip(node)


def node_of(device):
    """The node (server) a device belongs to."""
    return current_world().node_of(device)


def diagnostics():
    """Every diagnostic recorded in the current world, in order of detection."""
    return current_world().diagnostics


def read_array(addr, dtype, shape):
    """Read a numpy array of dtype and shape at a simulated address (needs numpy)."""
    import numpy as np
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(read(addr, count * dt.itemsize), dtype=dt).reshape(shape).copy()
