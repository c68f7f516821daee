"""Makes a Python program launched as an OS process a process of the launch, before its code
runs (site/sitecustomize.py calls run()).

It gets: torch with torch.npu, torch_npu and torchair (kvsim.hosting.torch_support; the NPU
tensors' bytes live in the world's HBM), the Ascend host environment of its node (/dev/davinci*,
hccn_tool, npu-smi: kvsim.hosting.ascend_env), its process context (node, visible devices), and
happens-before edges for its threading, queue and concurrent.futures objects
(kvsim.launched.happens_before).
At exit, its initialized LLMDataDists are finalized, as the library's atexit handler does. If
the launch stalls, the launcher asks it for every thread's Python stack (faulthandler, at
cpp/server/launch_server.h's stack_signal()) before it ends it.
"""
import atexit
import faulthandler
import signal

from kvsim import launched


def run():
    if not launched.active():  # a child the launch refused: it runs as a plain script
        return
    from kvsim.hosting import ascend_env, context, torch_support
    from kvsim.launched import happens_before, remote
    happens_before.install()  # before the program makes its locks, events and queues
    info = remote.process_info()
    context._active = context.ProcessContext(
        name=info["name"], rank=info["rank"], node=info["node"],
        visible_devices=list(info["visible_devices"]), node_devices=list(info["node_devices"]),
        host_ip=info["host_ip"], pid=__import__("os").getpid())
    # A child of a launched program (a forked or exec'd process, KVSIM_FORKED) may be another
    # interpreter, or a tool written in Python: without torch it runs without torch.npu.
    import importlib.util
    import os
    if not (os.environ.get("KVSIM_FORKED") and importlib.util.find_spec("torch") is None):
        torch_support.install()
    ascend_env.install_dev_patches()
    atexit.register(_finalize)
    faulthandler.register(stack_signal(), all_threads=True)


def stack_signal():
    """The signal a stalled launch sends for stacks (kvsim::cpp::stack_signal: SIGRTMIN + 7)."""
    return signal.SIGRTMIN + 7


def _finalize():
    from kvsim.launched import remote
    try:
        remote.request("llm_datadist at exit", "atexit")
    except ConnectionError:
        pass
