"""Happens-before edges of a launched Python program's own synchronisation, for the API rule
checker (kvsim.launch.rules).

The clocks live in the preloaded shim (cpp/preload/happens_before.h), which already orders a
thread after the thread that started it and a receiver after the sender of the bytes it reads
(sockets, eventfds: ZeroMQ's too). This module adds, by wrapping the standard library's
objects in this process, the edges that order one thread after another:

- ``Thread``: its end before a ``join()`` or ``is_alive()`` that sees it ended;
- ``Event``: ``set()`` before a ``wait()`` or ``is_set()`` that sees it set;
- ``Condition`` made by the program: ``notify()`` before the ``wait()`` it ends, and each
  release of its lock before the next acquisition (a condition exists to pass state);
- ``Semaphore``, ``BoundedSemaphore``: ``release()`` before an ``acquire()`` that succeeds;
- ``Barrier``: every party's arrival before any party leaves;
- ``queue.Queue``, ``LifoQueue``, ``SimpleQueue``: a ``put()`` before the ``get()`` that takes
  that item (``PriorityQueue``: every earlier ``put()``);
- ``concurrent.futures``: ``submit()`` before the call runs; the call's end (``set_result``,
  ``set_exception``) before ``result()``, ``exception()``, ``done()`` seeing it done, its done
  callbacks, and ``wait()``/``as_completed()`` returning it.

``Lock`` and ``RLock`` are not edges: each thread's held locks go with every API call, and the
checker counts two calls that hold one lock as ordered (whichever took it first, so the verdict
does not depend on the schedule). A lock released by a thread that did not take it is a signal
and becomes an edge to its next acquisition.
"""
import collections
import concurrent.futures
import concurrent.futures._base as futures_base
import concurrent.futures.thread as futures_thread
import ctypes
import itertools
import queue
import sys
import threading
import _thread

_lib = None
_keys = itertools.count(1)
_serials = itertools.count(1)
_TAG = 1 << 63  # keys of Python objects; the shim's own keys are addresses and thread slots
_local = threading.local()
_STAMP_CAPACITY = 4096

# The modules whose own Conditions are internals of the objects wrapped here: their edges come
# from the wrappers, not from the Condition (a Queue's conditions would otherwise order every
# get after every earlier put).
_INTERNAL = frozenset({"threading", "queue", "concurrent.futures._base",
                       "concurrent.futures.thread", __name__})


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(None)
        lib.kvsim_hb_release.argtypes = [ctypes.c_uint64]
        lib.kvsim_hb_acquire.argtypes = [ctypes.c_uint64]
        lib.kvsim_hb_stamp.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.kvsim_hb_stamp.restype = ctypes.c_size_t
        lib.kvsim_hb_thread.restype = ctypes.c_uint32
        _lib = lib
    return _lib


def new_key():
    """A key of its own for one object or item."""
    return _TAG | next(_keys)


def key_of(obj):
    """The object's key (given at its first use)."""
    try:
        return obj.__dict__["_kvsim_hb_key"]
    except KeyError:
        k = obj.__dict__.setdefault("_kvsim_hb_key", new_key())
        return k


def release(key):
    """The calling thread's clock joins the clock under `key`."""
    _library().kvsim_hb_release(key)


def acquire(key):
    """The clock under `key` joins the calling thread's clock."""
    _library().kvsim_hb_acquire(key)


def stamp():
    """(this thread's id in the clocks, its clock): what an API call carries."""
    lib = _library()
    buf = ctypes.create_string_buffer(_STAMP_CAPACITY)
    n = lib.kvsim_hb_stamp(buf, _STAMP_CAPACITY)
    if n > _STAMP_CAPACITY:
        buf = ctypes.create_string_buffer(n)
        n = lib.kvsim_hb_stamp(buf, n)
    return int(lib.kvsim_hb_thread()), buf.raw[:n]


def held_locks():
    """The locks the calling thread holds: ((key, serial of this hold), ...)."""
    return tuple(getattr(_local, "held", ()))


def _held():
    try:
        return _local.held
    except AttributeError:
        _local.held = []
        return _local.held


# --- locks: held sets, not edges ---------------------------------------------------------------

class _HeldLock:
    """What the program's Lock and RLock are: the real lock, and this thread's holds of it."""

    __slots__ = ("_inner", "_key", "_owner", "_depth", "_signalled", "__weakref__")

    def __init__(self, inner):
        self._inner = inner
        self._key = new_key()
        self._owner = None
        self._depth = 0
        self._signalled = False

    def _took(self):
        me = _thread.get_ident()
        if self._owner == me:
            self._depth += 1
            return
        self._owner, self._depth = me, 1
        _held().append((self._key, next(_serials)))
        if self._signalled:
            acquire(self._key)

    def _gives(self, everything=False):
        me = _thread.get_ident()
        if self._owner != me:  # released by a thread that did not take it: a signal
            self._signalled = True
            release(self._key)
            self._owner, self._depth = None, 0
            return
        self._depth = 0 if everything else self._depth - 1
        if self._depth == 0:
            self._owner = None
            held = _held()
            for i in range(len(held) - 1, -1, -1):
                if held[i][0] == self._key:
                    del held[i]
                    break

    def acquire(self, blocking=True, timeout=-1):
        ok = self._inner.acquire(blocking, timeout)
        if ok:
            self._took()
        return ok

    def release(self):
        self._gives()
        self._inner.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    def locked(self):
        return self._inner.locked()

    def _at_fork_reinit(self):
        self._inner._at_fork_reinit()
        self._owner, self._depth = None, 0
        _local.held = []

    def __repr__(self):
        return repr(self._inner)


class _HeldRLock(_HeldLock):
    __slots__ = ()

    def _is_owned(self):
        return self._inner._is_owned()

    def _release_save(self):
        self._gives(everything=True)
        return self._inner._release_save()

    def _acquire_restore(self, state):
        self._inner._acquire_restore(state)
        self._took()
        self._depth = state[0] if isinstance(state, tuple) else 1


def _lock():
    return _HeldLock(_thread.allocate_lock())


def _rlock(*args, **kwargs):
    return _HeldRLock(_thread.RLock(*args, **kwargs))


# --- the wrappers ------------------------------------------------------------------------------

_originals = {}


def _replace(owner, name, value):
    _originals.setdefault((owner, name), getattr(owner, name))
    setattr(owner, name, value)


def original(owner, name):
    """What `owner.name` was before install() wrapped it."""
    return _originals.get((owner, name), getattr(owner, name))


def _caller_module(depth):
    return sys._getframe(depth).f_globals.get("__name__", "")


def _install_condition():
    init, wait, notify = (threading.Condition.__init__, threading.Condition.wait,
                          threading.Condition.notify)
    enter, exit_ = threading.Condition.__enter__, threading.Condition.__exit__

    def __init__(self, lock=None):
        init(self, lock)
        self._kvsim_user = _caller_module(2) not in _INTERNAL

    def __enter__(self):
        took = enter(self)
        if self.__dict__.get("_kvsim_user"):
            acquire(key_of(self))
        return took

    def __exit__(self, *exc):
        if self.__dict__.get("_kvsim_user"):
            release(key_of(self))
        return exit_(self, *exc)

    def wait_(self, timeout=None):
        woken = wait(self, timeout)
        if self.__dict__.get("_kvsim_user"):
            acquire(key_of(self))
        return woken

    def notify_(self, n=1):
        if self.__dict__.get("_kvsim_user"):
            release(key_of(self))
        return notify(self, n)

    _replace(threading.Condition, "__init__", __init__)
    _replace(threading.Condition, "__enter__", __enter__)
    _replace(threading.Condition, "__exit__", __exit__)
    _replace(threading.Condition, "wait", wait_)
    _replace(threading.Condition, "notify", notify_)


def _install_event():
    set_, wait, is_set = threading.Event.set, threading.Event.wait, threading.Event.is_set

    def set_edge(self):
        release(key_of(self))
        return set_(self)

    def wait_edge(self, timeout=None):
        done = wait(self, timeout)
        if done:
            acquire(key_of(self))
        return done

    def is_set_edge(self):
        done = is_set(self)
        if done:
            acquire(key_of(self))
        return done

    _replace(threading.Event, "set", set_edge)
    _replace(threading.Event, "wait", wait_edge)
    _replace(threading.Event, "is_set", is_set_edge)
    _replace(threading.Event, "isSet", is_set_edge)


def _install_semaphore():
    acq, rel = threading.Semaphore.acquire, threading.Semaphore.release

    def acquire_edge(self, blocking=True, timeout=None):
        ok = acq(self, blocking, timeout)
        if ok:
            acquire(key_of(self))
        return ok

    def release_edge(self, n=1):
        release(key_of(self))
        return rel(self, n)

    _replace(threading.Semaphore, "acquire", acquire_edge)
    _replace(threading.Semaphore, "__enter__", acquire_edge)
    _replace(threading.Semaphore, "release", release_edge)
    brel = threading.BoundedSemaphore.release

    def bounded_release_edge(self, n=1):
        release(key_of(self))
        return brel(self, n)

    _replace(threading.BoundedSemaphore, "release", bounded_release_edge)


def _install_barrier():
    wait = threading.Barrier.wait

    def wait_edge(self, timeout=None):
        release(key_of(self))
        index = wait(self, timeout)
        acquire(key_of(self))
        return index

    _replace(threading.Barrier, "wait", wait_edge)


def _install_thread():
    bootstrap_inner, join, is_alive = (threading.Thread._bootstrap_inner, threading.Thread.join,
                                       threading.Thread.is_alive)

    def bootstrap_edge(self):
        try:
            bootstrap_inner(self)
        finally:
            release(key_of(self))

    def join_edge(self, timeout=None):
        join(self, timeout)
        if not is_alive(self):
            acquire(key_of(self))

    def is_alive_edge(self):
        alive = is_alive(self)
        if not alive and self._started.is_set():
            acquire(key_of(self))
        return alive

    _replace(threading.Thread, "_bootstrap_inner", bootstrap_edge)
    _replace(threading.Thread, "join", join_edge)
    _replace(threading.Thread, "is_alive", is_alive_edge)


def _item_edges(cls, put_name, get_name, order):
    """`put` releases a key of the item's own; `get` takes the key of the item it takes. Both
    run under the queue's mutex, so the keys pair with the items in the queue's order."""
    put, get = getattr(cls, put_name), getattr(cls, get_name)

    def put_edge(self, item):
        keys = self.__dict__.setdefault("_kvsim_items", collections.deque())
        k = new_key()
        release(k)
        keys.append(k)
        return put(self, item)

    def get_edge(self):
        keys = self.__dict__.setdefault("_kvsim_items", collections.deque())
        if keys:
            acquire(keys.popleft() if order == "fifo" else keys.pop())
        return get(self)

    _replace(cls, put_name, put_edge)
    _replace(cls, get_name, get_edge)


def _install_queues():
    _item_edges(queue.Queue, "_put", "_get", "fifo")
    _item_edges(queue.LifoQueue, "_put", "_get", "lifo")
    pput, pget = queue.PriorityQueue._put, queue.PriorityQueue._get

    def pput_edge(self, item):
        release(key_of(self))
        return pput(self, item)

    def pget_edge(self):
        acquire(key_of(self))
        return pget(self)

    _replace(queue.PriorityQueue, "_put", pput_edge)
    _replace(queue.PriorityQueue, "_get", pget_edge)

    class SimpleQueue(queue.SimpleQueue):
        """queue.SimpleQueue with an edge from each put to the get that takes its item."""

        __slots__ = ("_kvsim_items", "_kvsim_lock")

        def __init__(self):
            self._kvsim_items = collections.deque()
            self._kvsim_lock = _thread.allocate_lock()

        def put(self, item, block=True, timeout=None):
            with self._kvsim_lock:  # the item and its key enter in one order
                k = new_key()
                release(k)
                self._kvsim_items.append(k)
                super().put(item, block, timeout)

        put_nowait = put

        def get(self, block=True, timeout=None):
            item = super().get(block, timeout)
            with self._kvsim_lock:
                acquire(self._kvsim_items.popleft())
            return item

        def get_nowait(self):
            return self.get(False)

    queue.SimpleQueue = SimpleQueue  # ThreadPoolExecutor's work queue is made from it


def _install_futures():
    fut = futures_base.Future
    set_result, set_exception, result, exception, done, invoke = (
        fut.set_result, fut.set_exception, fut.result, fut.exception, fut.done,
        fut._invoke_callbacks)

    def set_result_edge(self, value):
        release(key_of(self))
        return set_result(self, value)

    def set_exception_edge(self, exc):
        release(key_of(self))
        return set_exception(self, exc)

    def result_edge(self, timeout=None):
        try:
            return result(self, timeout)
        finally:
            if fut.done(self):
                acquire(key_of(self))

    def exception_edge(self, timeout=None):
        value = exception(self, timeout)
        acquire(key_of(self))
        return value

    def done_edge(self):
        finished = done(self)
        if finished:
            acquire(key_of(self))
        return finished

    def invoke_edge(self):
        acquire(key_of(self))
        return invoke(self)

    _replace(fut, "set_result", set_result_edge)
    _replace(fut, "set_exception", set_exception_edge)
    _replace(fut, "result", result_edge)
    _replace(fut, "exception", exception_edge)
    _replace(fut, "done", done_edge)
    _replace(fut, "_invoke_callbacks", invoke_edge)

    wait = futures_base.wait

    def wait_edge(fs, timeout=None, return_when=futures_base.ALL_COMPLETED):
        result_sets = wait(fs, timeout, return_when)
        for f in result_sets.done:
            acquire(key_of(f))
        return result_sets

    _replace(futures_base, "wait", wait_edge)
    _replace(concurrent.futures, "wait", wait_edge)
    as_completed = futures_base.as_completed

    def as_completed_edge(fs, timeout=None):
        for f in as_completed(fs, timeout):
            acquire(key_of(f))
            yield f

    _replace(futures_base, "as_completed", as_completed_edge)
    _replace(concurrent.futures, "as_completed", as_completed_edge)

    work_init, work_run = futures_thread._WorkItem.__init__, futures_thread._WorkItem.run

    def work_init_edge(self, future, fn, args, kwargs):
        work_init(self, future, fn, args, kwargs)
        self._kvsim_key = new_key()
        release(self._kvsim_key)

    def work_run_edge(self):
        acquire(self._kvsim_key)
        return work_run(self)

    _replace(futures_thread._WorkItem, "__init__", work_init_edge)
    _replace(futures_thread._WorkItem, "run", work_run_edge)


_installed = False


def install():
    """Wraps the standard library's synchronisation objects (before the program's code runs,
    so that every object it makes is wrapped)."""
    global _installed
    if _installed:
        return
    _installed = True
    _library()
    _replace(threading, "Lock", _lock)
    _replace(threading, "RLock", _rlock)
    _install_condition()
    _install_event()
    _install_semaphore()
    _install_barrier()
    _install_thread()
    _install_queues()
    _install_futures()
