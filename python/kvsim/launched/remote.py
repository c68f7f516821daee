"""llm_datadist in a launched Python program: handles of the launcher's objects.

The program's LLMDataDist, CacheManager, KvCacheManager, KvCache and CacheTask are proxies; each
method call and attribute runs in the launcher (kvsim.launch.python_calls) on the same
kvsim._core as a hosted script, as this process, on the calling thread's channel, so it takes
the simulated time it takes there and raises what the library raises. Values (CacheDesc,
CacheKey, TransferConfig, Cache, enums, LLMException) are kvsim._core's own classes, made and
checked here, and cross by pickle. A LayerSynchronizer stays here: the library calls its
synchronize_layer on a thread of this process ("llm_datadist-callbacks"), as the real library
calls it from a thread of its own.
"""
import ctypes
import io
import os
import pickle
import sys
import threading
import time
import traceback
import weakref

from kvsim import _core
from kvsim.launched.writebacks import configs_in
from kvsim.launched import channel, happens_before

#: The classes whose objects live in the launcher.
REMOTE_CLASSES = ("LLMDataDist", "CacheManager", "KvCacheManager", "KvCache", "CacheTask")

_drops = []  # handles of proxies collected since the last request
# The program's LayerSynchronizers by sync id, with the number of requests that sent each and
# that the launcher has not released: held while a task there may call them (the library holds
# a synchronizer until its task ends; a program may pass a temporary).
_syncs = {}
_sync_ids = weakref.WeakKeyDictionary()  # LayerSynchronizer -> its sync id
_sync_lock = threading.Lock()
_next_sync = [1]
_callback_thread = None


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, RemoteObject):
            return ("ref", object.__getattribute__(obj, "_kvsim_handle"))
        if isinstance(obj, _core.LayerSynchronizer):
            return ("sync", _sync_id(obj))
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid):
        kind, handle, name = pid
        if kind != "ref":
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        return _proxy(name, handle)


def request(label, kind, *args):
    """Runs one request in the launcher: its value (writing back what the call changed in the
    arguments), or raises what it raised. A method call carries what the rule checker needs
    (kvsim.launch.rules): the calling thread, its happens-before clock, its locks, its name
    and the program's line that made the call."""
    drops = []
    while _drops:
        drops.append(_drops.pop())
    if kind == "call":
        args = args + (_call_context(),)
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump((drops, kind) + args)
    reply = _Unpickler(io.BytesIO(channel.call(label.encode() + b"\n" + out.getvalue()))).load()
    if reply[0] == "raise":
        raise reply[1]
    _, value, writebacks, released = reply
    if released:
        with _sync_lock:
            for sid, sends in released:
                held = _syncs.get(sid)
                if held is not None:
                    held[1] -= sends
                    if held[1] <= 0:
                        del _syncs[sid]
    if writebacks and kind == "call":
        for config, layer_range in zip(configs_in((args[2], args[3])), writebacks):
            config.src_layer_range = layer_range
    return value


_OURS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # kvsim/
         os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
             os.path.abspath(__file__)))), "llm_datadist"))


def _program_line():
    """"file:line" of the program's code that called into llm_datadist."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _call_context():
    thread, clock = happens_before.stamp()
    return (thread, clock, happens_before.held_locks(), threading.current_thread().name,
            _program_line())


def _sync_id(sync):
    global _callback_thread
    with _sync_lock:
        sid = _sync_ids.get(sync)
        if sid is None:
            sid = _next_sync[0]
            _next_sync[0] += 1
            _sync_ids[sync] = sid
        held = _syncs.setdefault(sid, [sync, 0])
        held[1] += 1
        if _callback_thread is None:
            _callback_thread = threading.Thread(target=_serve_callbacks, daemon=True,
                                                name="llm_datadist-callbacks")
            _callback_thread.start()
    return sid


def _serve_callbacks():
    """Runs the library's synchronize_layer calls for the program's synchronizers."""
    while True:
        cid, sid, layer, timeout = request(
            "llm_datadist's callback thread: waiting for a layer to synchronize", "next_callback")
        with _sync_lock:
            held = _syncs.get(sid)
        sync = held[0] if held is not None else None
        try:
            if sync is None:
                raise RuntimeError("the LayerSynchronizer was collected")
            ok, value = True, sync.synchronize_layer(layer, timeout)
            if not isinstance(value, (bool, int, type(None))):
                value = bool(value)
        except Exception as e:  # the task fails as it does in the launcher (spec §3.2)
            traceback.print_exc()
            ok = False
            value = e if type(e).__module__ == "builtins" else RuntimeError(f"{type(e).__name__}: {e}")
            value.__traceback__ = None
        request(f"llm_datadist's callback thread: layer {layer} synchronized", "callback_done",
                cid, ok, value)


class RemoteObject:
    """A handle of an object in the launcher."""

    __slots__ = ("_kvsim_handle", "__weakref__")

    def __del__(self):
        try:
            _drops.append(object.__getattribute__(self, "_kvsim_handle"))
        except Exception:
            pass

    def __repr__(self):
        return request(f"{type(self).__name__}.__repr__", "call", self, "__repr__", (), {})


def _method(cls_name, name):
    label = f"{cls_name}.{name}"

    def method(self, *args, **kwargs):
        return request(label, "call", self, name, args, kwargs)
    method.__name__ = name
    method.__qualname__ = label
    return method


def _property(cls_name, name):
    label = f"{cls_name}.{name}"
    return property(lambda self: request(label, "get", self, name),
                    lambda self, value: request(label, "set", self, name, value))


def _make_class(name):
    real = getattr(_core, name)
    attrs = {"__slots__": (), "__module__": "llm_datadist", "__doc__": real.__doc__}
    for attr in dir(real):
        if attr.startswith("_"):
            continue
        kind = getattr(real, attr)
        attrs[attr] = _property(name, attr) if isinstance(kind, property) else _method(name, attr)
    return type(name, (RemoteObject,), attrs)


_classes = {name: _make_class(name) for name in REMOTE_CLASSES}


def _proxy(name, handle):
    obj = object.__new__(_classes[name])
    object.__setattr__(obj, "_kvsim_handle", handle)
    return obj


def _new_llm_datadist(cls, *args, **kwargs):
    obj = object.__new__(cls)
    object.__setattr__(obj, "_kvsim_handle",
                       request("LLMDataDist()", "new", "LLMDataDist", args, kwargs))
    return obj


def _program_memory(addr, size):
    """True if [addr, addr + size) lies in readable and writable mappings of this process (as
    python/src/py_host_memory.cpp's program_memory), so that copying it cannot fault."""
    covered, end = addr, addr + size
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if perms.startswith("rw") and lo <= covered < hi:
                covered = hi
                if covered >= end:
                    return True
    return covered >= end


def _host_bytes(cache):
    """{address: bytes} of the tensors of a host cache that live in this program's memory
    (Cache.create_cpu_cache of CPU tensors): the launcher swaps against copies of them."""
    desc = cache.cache_desc
    if desc.placement != _core.Placement.HOST or desc.size == 0:
        return {}
    return {addr: ctypes.string_at(addr, desc.size) for addr in cache.tensor_addrs
            if _program_memory(addr, desc.size)}


def _swap_blocks(self, src, dst, src_to_dst):
    written = request("CacheManager.swap_blocks", "swap_blocks", self, src, dst, src_to_dst,
                      _host_bytes(src), _host_bytes(dst))
    for addr, data in written.items():
        ctypes.memmove(addr, data, len(data))


_classes["CacheManager"].swap_blocks = _swap_blocks
_classes["LLMDataDist"].__new__ = _new_llm_datadist
LLMDataDist = _classes["LLMDataDist"]
CacheManager = _classes["CacheManager"]
KvCacheManager = _classes["KvCacheManager"]
KvCache = _classes["KvCache"]
CacheTask = _classes["CacheTask"]


# The kvsim functions the program's torch NPU runtime uses (kvsim.hosting.npu).

def alloc(device, nbytes):
    """kvsim.alloc in the launcher, as this process."""
    return request("kvsim.alloc", "memory", "alloc", (device, nbytes))


def free(addr):
    """kvsim.free in the launcher, as this process."""
    return request("kvsim.free", "memory", "free", (addr,))


def read(addr, nbytes):
    """kvsim.read in the launcher."""
    return request("kvsim.read", "memory", "read", (addr, nbytes))


def write(addr, data):
    """kvsim.write in the launcher."""
    return request("kvsim.write", "memory", "write", (addr, bytes(data)))


def now_ps():
    """The simulated time of the calling thread, in picoseconds."""
    return channel.now_ps()


class RemoteWorld:
    """What a launched program may know of the launch's world (kvsim.current_world())."""

    def __init__(self, info):
        self.alive = True
        self.preset = info["preset"]
        self.device_count = info["device_count"]
        self.nodes = info["nodes"]
        self._host_ips = info["host_ips"]
        self._device_ips = info["device_ips"]
        self._node_of = info["node_of"]

    def host_ip(self, node):
        return self._host_ips[node]

    def device_ip(self, device):
        return self._device_ips[device]

    def node_of(self, device):
        return self._node_of[device]

    def inventory(self):
        """kvsim.World.inventory() of the launch's world, now."""
        return request("kvsim.World.inventory", "world_query", "inventory")

    @property
    def links(self):
        """kvsim.World.links of the launch's world, now."""
        return request("kvsim.World.links", "world_query", "links")

    @property
    def diagnostics(self):
        """kvsim.World.diagnostics of the launch's world, so far."""
        return request("kvsim.World.diagnostics", "world_query", "diagnostics")


_world = None


def current_world():
    """The launch's world as this program sees it."""
    global _world
    if _world is None:
        _world = RemoteWorld(request("kvsim.current_world", "world"))
    return _world


def process_info():
    """This process as the launch made it: name, node, visible_devices, node_devices, host_ip."""
    return request("kvsim launch: process", "process")


def sleep(seconds):
    """kvsim.sleep in a launched program: the calling thread sleeps (in simulated time)."""
    time.sleep(seconds)


class Event(threading.Event):
    """kvsim.Event in a launched program: a threading.Event (which waits in simulated time)."""

    def record(self):
        """As kvsim.Event.record: sets it."""
        self.set()


def unsupported(name):
    def fail(*args, **kwargs):
        raise RuntimeError(f"kvsim.{name} is not available in a launched program (it belongs to "
                           "scripts that make their own world)")
    return fail

