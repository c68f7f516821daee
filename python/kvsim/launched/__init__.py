"""The program's side of a Python program launched as an OS process (kvsim launch).

Such a program has the preloaded shim (its threads, clocks, sleeps and sockets run in the
launch's simulated time) and ``KVSIM_WORLD_SOCKET`` in its environment. Its ``llm_datadist``
objects are handles of objects in the launcher (kvsim.launched.remote), and its torch NPU
memory lives in the world's HBM. ``site/sitecustomize.py`` sets this up before the program runs.
"""
import os

_active = None


def active():
    """True in a Python program launched as an OS process that the world accepted."""
    global _active
    if _active is None:
        _active = False
        if os.environ.get("KVSIM_WORLD_SOCKET") and os.environ.get("KVSIM_PYTHON_LAUNCHED"):
            from kvsim.launched import channel
            _active = channel.launched()
    return _active
