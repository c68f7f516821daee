"""The simulated host process that Python code runs for, if any.

A plain script (not launched) has no process context: it sees every device of the world, with
logical device ids equal to the world's device ids. Code of a launched program runs with the
context of its process active; ``current()`` returns it.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class ProcessContext:
    """What one simulated host process knows of itself."""
    name: str                      # the launch's name for it ("prompt", "p0", ...)
    rank: int                      # position in the launch, from 0
    node: int                      # the node (server) it runs on
    visible_devices: List[int]     # world device ids, in logical order (ASCEND_RT_VISIBLE_DEVICES)
    node_devices: List[int]        # world device ids of its node, physical id = position
    host_ip: str                   # the node's host address
    pid: int                       # the pid os.getpid() reports in the process
    state: Dict[str, object] = field(default_factory=dict)  # per-process state of the runtimes


_active: Optional[ProcessContext] = None


def current() -> Optional[ProcessContext]:
    """The process whose code is running, or None for a plain script."""
    return _active


def visible_devices() -> List[int]:
    """World device ids the running code may use, indexed by logical device id."""
    if _active is not None:
        return list(_active.visible_devices)
    from kvsim import current_world
    return list(range(current_world().device_count))


def process_state(key, factory):
    """Per-process state of a runtime (the script's own when not launched)."""
    store = _active.state if _active is not None else _script_state
    if key not in store:
        store[key] = factory()
    return store[key]


_script_state: Dict[str, object] = {}
