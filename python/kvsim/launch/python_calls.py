"""The launcher's side of Python programs' llm_datadist calls (wire Op::kPython).

A Python program launched as an OS process imports the llm_datadist of kvsim.launched: its
LLMDataDist, CacheManager, KvCacheManager, KvCache and CacheTask objects are handles of objects
that live here, in the launcher's interpreter, and every method call runs here on the calling
thread's job, as that program's host process, through the same kvsim._core (and impl/) as a
hosted script. Values (CacheDesc, CacheKey, TransferConfig, Cache, enums, exceptions) cross by
pickle. A LayerSynchronizer of the program stays in the program: the task calls a forwarder here,
and the program's callback thread (kvsim.launched.remote) runs the real synchronize_layer.

Request: b"<label>\\n" + pickle((drops, kind, *args)); reply: pickle(("ok", value, writebacks))
or pickle(("raise", exception)). The label names the call in stall reports.
"""
import collections
import ctypes
import io
import pickle
import weakref

from kvsim import _core
from kvsim.launch import rules
from kvsim.launched.writebacks import configs_in

#: Objects that cross as handles: they hold the state of a program's llm_datadist.
REMOTE_TYPES = (_core.LLMDataDist, _core.CacheManager, _core.KvCacheManager, _core.KvCache,
                _core.CacheTask)
#: Classes a program may create here (the rest come from their methods).
CONSTRUCTIBLE = {"LLMDataDist": _core.LLMDataDist}
#: The kvsim functions a program's torch.npu runtime uses (kvsim.hosting.npu, npu_tensor).
MEMORY_CALLS = {"alloc": _core.alloc, "free": _core.free, "read": _core.read,
                "write": _core.write}
#: The World methods a launched program may call (read-only queries).
WORLD_QUERIES = ("inventory", "links", "diagnostics")
#: Modules whose classes a request may name when it is unpickled.
_SAFE_MODULES = {"builtins", "llm_datadist", "kvsim._core", "copyreg", "_codecs"}


class _ForwardingSynchronizer(_core.LayerSynchronizer):
    """Stands here for a program's LayerSynchronizer: each synchronize_layer waits (in simulated
    time, on the task's job) until the program's callback thread has run the real one."""

    def __init__(self, process, sync_id):
        self._process, self._sync_id = process, sync_id

    def synchronize_layer(self, layer_index, timeout_in_millis):
        return self._process.callback(self._sync_id, layer_index, timeout_in_millis)

    def __del__(self):  # the library let it go: so may the program, for the sends it covered
        self._process.released.append((self._sync_id, self._process.sends.pop(self._sync_id, 0)))


class _Process:
    """What one program holds here: its objects by handle, its synchronizers, and the layer
    callbacks waiting for its callback thread."""

    def __init__(self):
        self.objects = {}  # handle -> object; each time an object is sent it gets a new handle,
        self.next_handle = 1  # so that a handle the program drops is never in use again
        self.syncs = weakref.WeakValueDictionary()  # sync id -> its stand-in, while used
        self.sends = collections.Counter()  # sync id -> requests that named it, this stand-in
        self.released = []  # (sync id, sends) of stand-ins the library let go of
        self.callbacks = collections.deque()  # (callback id, sync id, layer, timeout)
        self.results = {}  # callback id -> [Event, ok, value]
        self.next_callback = 1
        self.callback_ready = None
        self.ended = None  # why, once it has ended
        self.memory = set()  # addresses it allocated and has not freed

    def handle_of(self, obj):
        h = self.next_handle
        self.next_handle += 1
        self.objects[h] = obj
        return h

    def drop(self, handle):
        self.objects.pop(handle, None)

    def callback(self, sync_id, layer, timeout):
        if self.ended is not None:
            raise RuntimeError(f"the program ended ({self.ended})")
        cid = self.next_callback
        self.next_callback += 1
        done = _core.Event()
        self.results[cid] = [done, None, None]
        self.callbacks.append((cid, sync_id, layer, timeout))
        if self.callback_ready is not None:
            self.callback_ready.set()
        done.wait()
        _, ok, value = self.results.pop(cid)
        if not ok:
            raise value
        return value

    def next_callback_for_program(self):
        while not self.callbacks:
            if self.ended is not None:
                raise RuntimeError(f"the program ended ({self.ended})")
            self.callback_ready = _core.Event()
            self.callback_ready.wait()
        return self.callbacks.popleft()

    def callback_done(self, cid, ok, value):
        slot = self.results.get(cid)
        if slot is None:
            return
        slot[1], slot[2] = ok, value
        slot[0].set()

    def take_released(self):
        """(sync id, sends) the program may stop holding its synchronizer for."""
        out, self.released = self.released, []
        return out

    def end(self, why):
        self.ended = why
        if self.callback_ready is not None:
            self.callback_ready.set()
        for cid in list(self.results):
            self.callback_done(cid, False, RuntimeError(f"the program ended ({why})"))


class _Pickler(pickle.Pickler):
    def __init__(self, file, process):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._process = process

    def persistent_id(self, obj):
        if isinstance(obj, REMOTE_TYPES):
            return ("ref", self._process.handle_of(obj), type(obj).__name__)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, process):
        super().__init__(file)
        self._process = process

    def persistent_load(self, pid):
        kind, ident = pid[0], pid[1]
        if kind == "ref":
            try:
                return self._process.objects[ident]
            except KeyError:
                raise ValueError(f"no object {ident} (it was dropped)") from None
        if kind == "sync":
            self._process.sends[ident] += 1
            sync = self._process.syncs.get(ident)
            if sync is None:
                sync = self._process.syncs[ident] = _ForwardingSynchronizer(self._process, ident)
            return sync
        raise pickle.UnpicklingError(f"unknown reference {pid!r}")

    def find_class(self, module, name):
        if module not in _SAFE_MODULES:
            raise pickle.UnpicklingError(f"a request may not name {module}.{name}")
        return super().find_class(module, name)


class PythonCalls:
    """Serves the Python programs of one launch (LaunchServer's python_calls)."""

    def __init__(self, world, strict=False):
        self.world = world
        self.ranks = {}  # host process -> its rank in the launch
        self._processes = {}
        self._names = {}
        self.strict = strict  # every LLMDataDist initializes with kvsim.Strict
        self.rules = rules.Checker()

    def process_name(self, process):
        name = self._names.get(process)
        if name is None:
            name = self._names[process] = self.world.process(process)["name"]
        return name

    def _process(self, process):
        p = self._processes.get(process)
        if p is None:
            p = self._processes[process] = _Process()
        return p

    def call(self, process, request):
        """One request of host process `process`: its reply bytes."""
        p = self._process(process)
        label, _, body = request.partition(b"\n")
        try:
            drops, kind, *args = _Unpickler(io.BytesIO(body), p).load()
            for handle in drops:
                p.drop(handle)
            value, writebacks = self._run(p, process, kind, args)
            reply = ("ok", value, writebacks, p.take_released())
        except Exception as e:  # the program's own error, raised there
            e.__traceback__ = None
            reply = ("raise", e)
        out = io.BytesIO()
        try:
            _Pickler(out, p).dump(reply)
        except Exception as e:  # a value that does not pickle: the program gets why
            out = io.BytesIO()
            _Pickler(out, p).dump(("raise", RuntimeError(
                f"kvsim launch: the reply to {label.decode(errors='replace')} cannot be sent "
                f"to the program: {e}")))
        return out.getvalue()

    def _run(self, p, process, kind, args):
        if kind == "call":
            obj, name, a, kw, context = args
            if self.strict and name == "init" and type(obj).__name__ == "LLMDataDist":
                a, kw = strict_options(a, kw)
            configs = configs_in((a, kw))
            who = self.process_name(process)
            try:
                result = getattr(obj, name)(*a, **kw)
            except BaseException as e:
                self.rules.call(who, obj, name, configs, a, kw, context, e)
                raise
            self.rules.call(who, obj, name, configs, a, kw, context, result)
            return result, [c.src_layer_range for c in configs]
        if kind == "get":
            obj, name = args
            value = getattr(obj, name)
            self.rules.got(self.process_name(process), obj, name, value)
            return value, []
        if kind == "set":
            obj, name, value = args
            setattr(obj, name, value)
            return None, []
        if kind == "new":
            name, a, kw = args
            if name not in CONSTRUCTIBLE:
                raise TypeError(f"{name} cannot be created by a program")
            return p.handle_of(CONSTRUCTIBLE[name](*a, **kw)), []
        if kind == "describe":
            (name,) = args
            cls = next(t for t in REMOTE_TYPES if t.__name__ == name)
            return describe_type(cls), []
        if kind == "memory":
            name, a = args
            value = MEMORY_CALLS[name](*a)
            if name == "alloc":
                p.memory.add(value)
            elif name == "free":
                p.memory.discard(a[0])
            return value, []
        if kind == "atexit":  # the library finalizes what the program left initialized
            return self.world.finalize_process(process), []
        if kind == "process":
            info = self.world.process(process)
            info["rank"] = self.ranks.get(process, 0)
            info["node_devices"] = [d for d in range(self.world.device_count)
                                    if self.world.node_of(d) == info["node"]]
            info["host_ip"] = self.world.host_ip(info["node"])
            return info, []
        if kind == "world":
            w = self.world
            return {"preset": w.preset, "device_count": w.device_count, "nodes": w.nodes,
                    "host_ips": [w.host_ip(n) for n in range(w.nodes)],
                    "device_ips": [w.device_ip(d) for d in range(w.device_count)],
                    "node_of": [w.node_of(d) for d in range(w.device_count)]}, []
        if kind == "world_query":  # what a program may read of the world, never change
            (name,) = args
            if name not in WORLD_QUERIES:
                raise ValueError(f"kvsim.World.{name} is not available to a launched program")
            value = getattr(self.world, name)
            return (value() if callable(value) else value), []
        if kind == "swap_blocks":
            return swap_blocks(*args), []
        if kind == "next_callback":
            return p.next_callback_for_program(), []
        if kind == "callback_done":
            p.callback_done(*args)
            return None, []
        raise ValueError(f"unknown request kind {kind!r}")

    def ended(self, process, why):
        """Host process `process` has ended: its pending layer callbacks fail, its LLMDataDists
        are abandoned as a dead process's are (its peers learn of it), and the memory it still
        held is freed, as the driver frees a dead process's device memory."""
        why = why.decode() if isinstance(why, bytes) else why
        p = self._processes.pop(process, None)
        if p is not None:
            p.end(why)
        self.world.abandon_process(process, why)
        for addr in sorted(p.memory if p is not None else ()):  # as the driver reclaims it
            _core.free(addr)
        return b""


def strict_options(args, kwargs):
    """LLMDataDist.init's arguments with kvsim.Strict on (kvsim launch --strict)."""
    args, kwargs = list(args), dict(kwargs)
    if args:
        args[0] = dict(args[0] or {}, **{"kvsim.Strict": "1"})
    else:
        kwargs["options"] = dict(kwargs.get("options") or {}, **{"kvsim.Strict": "1"})
    return tuple(args), kwargs


def _simulated(addr, size):
    try:
        _core.read(addr, size)
        return True
    except Exception:
        return False


def _with_local_memory(cache, host, keep):
    """`cache` with each tensor the program sent the bytes of moved into a buffer here (which
    the library's swap_blocks mirrors as this process's memory); {program address: buffer}."""
    addrs, moved = list(cache.tensor_addrs), {}
    for i, addr in enumerate(addrs):
        data = host.get(addr)
        if data is None or _simulated(addr, len(data)):
            continue
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        keep.append(buf)
        moved[addr] = buf
        addrs[i] = ctypes.addressof(buf)
    if not moved:
        return cache, moved
    state = cache.__getstate__()
    local = _core.Cache.__new__(_core.Cache)
    local.__setstate__((state[0], state[1], addrs) + tuple(state[3:]))
    return local, moved


def swap_blocks(manager, src, dst, src_to_dst, host_src, host_dst):
    """CacheManager.swap_blocks for a program whose CPU caches hold its own memory: the bytes
    it sent stand in for that memory here; {program address: bytes} of what dst's became."""
    keep = []
    local_src, _ = _with_local_memory(src, host_src, keep)
    local_dst, moved = _with_local_memory(dst, host_dst, keep)
    manager.swap_blocks(local_src, local_dst, src_to_dst)
    return {addr: buf.raw for addr, buf in moved.items()}


def describe_type(cls):
    """{name: "method" | "property"} of a class's public attributes, for the program's proxies."""
    out = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = getattr(cls, name)
        out[name] = "property" if isinstance(attr, property) else "method"
    return out
