"""The NPU runtime of a hosted process: ``torch.npu`` and ``torch_npu.npu`` are this module.

Logical device ids are those of the process (``context.visible_devices()`` maps them to world
devices); the current device is per process. Device memory is simulated HBM from
``kvsim.alloc`` (real bytes, 2 MiB aligned), freed when the last tensor using it is collected.
Host-side calls take no simulated time: work "launched" on a stream is complete at once, so
events and streams are always complete (kvsim models compute with ``kvsim.sleep`` in jobs).
"""
import os
import re
import weakref

import kvsim
from kvsim.hosting import context

_STATE_KEY = "kvsim.hosting.npu"

# torch_npu's SoC names (torch.npu.get_device_name) and npu-smi's chip names, by preset.
_DEVICE_NAMES = {
    "atlas-a2": "Ascend910B3",
    "atlas-a3": "Ascend910_9392",
    "cloudmatrix384": "Ascend910_9392",
    "dgx-h100": "NVIDIA H100 80GB HBM3",
    "dgx-h200": "NVIDIA H200",
    "aws-p5en": "NVIDIA H200",
    "hgx-h800": "NVIDIA H800",
    "hgx-h20": "NVIDIA H20",
}


class _State:
    """Per-process runtime state."""

    def __init__(self):
        self.current = 0
        self.streams = {}       # logical device -> current Stream
        self.allocated = {}     # world device -> bytes held by live buffers of this process
        self.live = {}          # address -> the finalizer that frees it


def _state():
    return context.process_state(_STATE_KEY, _State)


class NpuDevice:
    """An NPU device as torch_npu's ``torch.device("npu:N")``: type "npu", index or None."""

    __slots__ = ("_index",)

    def __init__(self, index=None):
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"device index must be an int, not {type(index).__name__}")
            if index < 0:
                raise RuntimeError(f"Device index must not be negative: npu:{index}")
        self._index = index

    @property
    def type(self):
        return "npu"

    @property
    def index(self):
        return self._index

    def __str__(self):
        return "npu" if self._index is None else f"npu:{self._index}"

    def __repr__(self):
        if self._index is None:
            return "device(type='npu')"
        return f"device(type='npu', index={self._index})"

    def __eq__(self, other):
        return isinstance(other, NpuDevice) and other._index == self._index

    def __hash__(self):
        return hash(("npu", self._index))

    def __reduce__(self):
        return (NpuDevice, (self._index,))


def parse_device(spec):
    """An NpuDevice for "npu", "npu:N", an int N, or a device object of type npu; else None."""
    if isinstance(spec, NpuDevice):
        return spec
    if isinstance(spec, bool):
        return None
    if isinstance(spec, int):
        return NpuDevice(spec)
    if isinstance(spec, str):
        m = re.fullmatch(r"npu(?::(\d+))?", spec.strip())
        if m is None:
            if spec.strip().startswith("npu"):
                raise RuntimeError(f"Invalid device string: '{spec}'")
            return None
        return NpuDevice(None if m.group(1) is None else int(m.group(1)))
    if getattr(spec, "type", None) == "npu":
        return NpuDevice(getattr(spec, "index", None))
    return None


def _device_index(device, optional=True):
    """The logical index `device` names (None: the current device)."""
    if device is None:
        if optional:
            return current_device()
        raise ValueError("Expected a npu device with a specified index or an integer, "
                         "but got: None")
    if isinstance(device, bool):
        raise TypeError(f"Invalid device, must be npu device or int, not {type(device).__name__}")
    if isinstance(device, int):
        return device
    parsed = parse_device(device)
    if parsed is None:
        if isinstance(device, str) or hasattr(device, "type"):
            raise ValueError(f"Expected a npu device, but got: {device}")
        raise TypeError(f"Invalid device, must be npu device or int, not {type(device).__name__}")
    return current_device() if parsed.index is None else parsed.index


def _check(index):
    count = device_count()
    if index < 0 or index >= count:
        # torch_npu reports aclrtSetDevice's ACL_ERROR_RT_INVALID_DEVICEID (107001).
        raise RuntimeError(f"Invalid device ID. NPU function error: aclrtSetDevice({index}), "
                           f"error code is 107001 ({count} NPU devices are visible)")
    return index


def device_count():
    """Number of NPUs the process sees (its visible devices)."""
    return len(context.visible_devices())


def is_available():
    """NPUs are always available on kvsim."""
    return True


def is_initialized():
    """The runtime needs no initialisation."""
    return True


def init():
    """No-op, as torch.npu.init() after the first call."""


def current_device():
    """The process's current logical device (0 until set_device)."""
    return _state().current


def set_device(device):
    """Make `device` (int, "npu:N", device object) current; a negative index is ignored."""
    index = _device_index(device, optional=False)
    if index < 0:
        return
    _state().current = _check(index)


def world_device(device=None):
    """The world device id of a logical device (default: the current one)."""
    index = _check(_device_index(device))
    return context.visible_devices()[index]


def synchronize(device=None):
    """Wait for the device's work: host-launched work is complete at once."""
    _check(_device_index(device))


def soc_name(preset):
    """The SoC name of a preset's devices ("Ascend910B3" for atlas-a2)."""
    return _DEVICE_NAMES.get(os.path.splitext(os.path.basename(preset))[0], f"kvsim-{preset}")


def get_device_name(device=None):
    """The device's SoC name (torch_npu: "Ascend910B3" on an Atlas 800 A2)."""
    _check(_device_index(device))
    return soc_name(kvsim.current_world().preset)


class device:
    """Context manager that makes a device current and restores the previous one."""

    def __init__(self, device):
        self._index = -1 if device is None else _device_index(device)
        self._previous = None

    def __enter__(self):
        self._previous = current_device()
        if self._index >= 0:
            set_device(self._index)
        return self

    def __exit__(self, *exc):
        _state().current = self._previous
        return False


# Events and streams.

class Event:
    """torch.npu.Event: recorded on the host, complete at once (no device work is pending)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = bool(interprocess)
        self._recorded_ps = None

    def record(self, stream=None):
        """Record the event (at the current simulated time)."""
        self._recorded_ps = kvsim.now_ps()

    def query(self):
        """True: the recorded work is done (an unrecorded event counts as done, as in CUDA)."""
        return True

    def synchronize(self):
        """Return at once: recorded work is complete."""

    def wait(self, stream=None):
        """Make a stream wait for the event: nothing to wait for."""

    def elapsed_time(self, end_event):
        """Simulated milliseconds from this event's record to `end_event`'s."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._recorded_ps is None or end_event._recorded_ps is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._recorded_ps - self._recorded_ps) / 1e9

    def __repr__(self):
        return f"<torch.npu.Event recorded={self._recorded_ps is not None}>"


class Stream:
    """torch.npu.Stream on a logical device; always idle."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = NpuDevice(_check(_device_index(device)))
        self.priority = priority

    def query(self):
        """True: the stream has no pending work."""
        return True

    def synchronize(self):
        """Return at once: the stream has no pending work."""

    def wait_event(self, event):
        """Make the stream wait for an event: nothing to wait for."""

    def wait_stream(self, stream):
        """Make the stream wait for another: nothing to wait for."""

    def record_event(self, event=None):
        """Record `event` (a new one if None) on the stream and return it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"<torch.npu.Stream device={self.device} priority={self.priority}>"


def default_stream(device=None):
    """The default stream of a device (one per device and process)."""
    index = _check(_device_index(device))
    streams = context.process_state(_STATE_KEY + ".default_streams", dict)
    if index not in streams:
        streams[index] = Stream(index)
    return streams[index]


def current_stream(device=None):
    """The current stream of a device (its default stream unless set_stream chose another)."""
    index = _check(_device_index(device))
    return _state().streams.get(index) or default_stream(index)


def set_stream(stream):
    """Make `stream` current on its device."""
    if stream is not None:
        _state().streams[stream.device.index] = stream


class stream:
    """Context manager that makes a stream current on its device."""

    def __init__(self, stream):
        self._stream = stream
        self._previous = None

    def __enter__(self):
        if self._stream is not None:
            self._previous = current_stream(self._stream.device.index)
            set_stream(self._stream)
        return self._stream

    def __exit__(self, *exc):
        if self._stream is not None:
            set_stream(self._previous)
        return False


# Random numbers: tensors on the NPU are drawn on the CPU generator of the active torch.

def manual_seed(seed):
    """Seed the generator NPU tensors are drawn from (the active torch's CPU generator)."""
    import torch  # only reachable through torch.npu / torch_npu, so torch is loaded
    torch.manual_seed(seed)


manual_seed_all = manual_seed


# Memory.

class DeviceBuffer:
    """Simulated HBM owned by tensors: freed when the last reference goes."""

    __slots__ = ("addr", "nbytes", "device", "world_device", "world", "__weakref__")

    def __init__(self, addr, nbytes, device, world_device, world):
        self.addr = addr
        self.nbytes = nbytes
        self.device = device
        self.world_device = world_device
        self.world = world

    def check_alive(self):
        """RuntimeError if the world holding these bytes was replaced."""
        if not self.world.alive:
            raise RuntimeError("this NPU tensor's memory belonged to a kvsim world that was "
                               "replaced")

    def __repr__(self):
        return (f"DeviceBuffer(addr=0x{self.addr:x}, nbytes={self.nbytes}, "
                f"device=npu:{self.device}, world_device={self.world_device})")


def _release(world, addr, state, world_dev, nbytes):
    # A replaced world's addresses may be reused by the new one: free only in the live world.
    state.allocated[world_dev] = state.allocated.get(world_dev, 0) - nbytes
    state.live.pop(addr, None)
    if world.alive:
        try:
            kvsim.free(addr)
        except Exception:  # never raise from a finalizer
            pass


def alloc(nbytes, device=None):
    """A DeviceBuffer of `nbytes` in the HBM of a logical device (default: current)."""
    index = _check(_device_index(device))
    world_dev = context.visible_devices()[index]
    world = kvsim.current_world()
    if nbytes == 0:
        return DeviceBuffer(0, 0, index, world_dev, world)  # torch gives empty tensors no storage
    addr = kvsim.alloc(world_dev, nbytes)
    buf = DeviceBuffer(addr, nbytes, index, world_dev, world)
    state = _state()
    state.allocated[world_dev] = state.allocated.get(world_dev, 0) + nbytes
    fin = weakref.finalize(buf, _release, world, addr, state, world_dev, nbytes)
    fin.atexit = False  # the world goes away with the interpreter
    state.live[addr] = fin
    return buf


def release_process_memory(process_state):
    """Frees the device memory an ended process still held (a traceback's frames, module
    globals), as the driver frees a dead process's memory. Its tensors become unusable."""
    state = process_state.get(_STATE_KEY)
    if state is not None:
        for fin in list(state.live.values()):
            fin()


def memory_allocated(device=None):
    """Bytes held by this process's live NPU tensors on a device."""
    index = _check(_device_index(device))
    return _state().allocated.get(context.visible_devices()[index], 0)


def empty_cache():
    """No-op: memory returns to the device when tensors are collected (no caching allocator)."""


_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def _preset_hbm_capacity(preset):
    """hbm.capacity of a preset file, searched as kvsim searches presets; None if not found."""
    from kvsim import _core
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if preset.endswith(".yaml") or "/" in preset:
        candidates = [preset]
    else:
        dirs = [d for d in os.environ.get("KVSIM_PRESET_PATH", "").split(":") if d]
        dirs += [os.path.join(here, "presets"),
                 os.path.join(getattr(_core, "_source_dir", "."), "scenarios", "presets")]
        candidates = [os.path.join(d, preset + ".yaml") for d in dirs]
    for path in candidates:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            m = re.search(r"^hbm:\s*\n(?:[ \t]+.*\n)*?[ \t]+capacity:\s*([0-9.]+)\s*([A-Za-z]+)",
                          text, re.M)
            if m and m.group(2).upper() in _UNITS:
                return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
            return None
    return None


def mem_get_info(device=None):
    """(free, total) bytes of a device's HBM.

    free is the largest range kvsim.alloc can still give (found by probing, 2 MiB grain);
    total is the preset's hbm.capacity (a world's overrides of it are not seen), or
    free + this process's allocations if the preset file is not found.
    """
    world_dev = world_device(device)
    total = _preset_hbm_capacity(kvsim.current_world().preset)
    grain = 2 << 20
    lo, hi = 0, (total if total else 1 << 44) // grain
    while lo < hi:  # largest multiple of the grain that fits
        mid = (lo + hi + 1) // 2
        try:
            addr = kvsim.alloc(world_dev, mid * grain)
        except RuntimeError:
            hi = mid - 1
        else:
            kvsim.free(addr)
            lo = mid
    free = lo * grain
    if total is None:
        total = free + _state().allocated.get(world_dev, 0)
    return free, total
