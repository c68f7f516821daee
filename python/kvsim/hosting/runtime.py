"""Hosted programs: each program of a launch runs in this interpreter as a simulated host process.

A process has what a program sees of its own OS process: its argv, environment, ``__main__``,
the modules it imported from its own directory, its standard streams (lines prefixed with its
name), its pid, its clocks and sleeps (simulated time), its random bytes (seeded), its atexit
handlers and its exit status. ``Runtime.switch`` swaps these in whenever the simulation resumes
code of another process (kvsim._core calls it); library modules (torch, numpy, kvsim) are shared,
as the interpreter is.
"""
import atexit
import builtins
import datetime as _datetime
import importlib.machinery
import importlib.util
import io
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import weakref

from kvsim import _core
from kvsim.hosting import context, npu

# Originals of everything patched, so that the launcher itself keeps the real ones.
_real = {
    "sleep": time.sleep, "time": time.time, "time_ns": time.time_ns,
    "monotonic": time.monotonic, "monotonic_ns": time.monotonic_ns,
    "perf_counter": time.perf_counter, "perf_counter_ns": time.perf_counter_ns,
    "process_time": time.process_time, "process_time_ns": time.process_time_ns,
    "getpid": os.getpid, "getppid": os.getppid, "_exit": os._exit, "urandom": os.urandom,
    "system": os.system, "fork": os.fork, "popen_init": subprocess.Popen.__init__,
    "thread_start": threading.Thread.start, "signal": signal.signal,
    "atexit_register": atexit.register, "atexit_unregister": atexit.unregister,
    "datetime": _datetime.datetime, "date": _datetime.date, "input": builtins.input,
}


class HostedExit(BaseException):
    """os._exit in a hosted process: ends it at once, without atexit handlers."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class _Output:
    """One standard stream of a process: whole lines, prefixed, to the launcher's stream."""

    def __init__(self, prefix, sink, copy=None):
        self._prefix, self._sink, self._copy, self._partial = prefix, sink, copy, ""

    def write(self, text):
        if self._copy is not None:
            self._copy.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._sink.write(f"{self._prefix}{line}\n")
        if lines:
            self._sink.flush()

    def close(self):
        if self._partial:
            self.write("\n")
        if self._copy is not None:
            self._copy.close()


class _ProcessStream(io.TextIOBase):
    """sys.stdout / sys.stderr while a launch runs: the active process's stream, else the real
    one. Permanent, so that handlers that captured the stream (logging) follow the process."""

    def __init__(self, runtime, which, real):
        self._runtime, self._which, self._real = runtime, which, real

    def write(self, text):
        proc = self._runtime.active
        if proc is None:
            return self._real.write(text)
        getattr(proc, self._which).write(text)
        return len(text)

    def flush(self):
        if self._runtime.active is None:
            self._real.flush()

    def fileno(self):
        return self._real.fileno()

    def isatty(self):
        return False

    @property
    def encoding(self):
        return self._real.encoding

    @property
    def errors(self):
        return self._real.errors


class Process:
    """One hosted program."""

    def __init__(self, runtime, rank, name, node, pid, argv, environ, script, cwd,
                 output_dir=None):
        self.runtime, self.rank, self.name, self.node, self.pid = runtime, rank, name, node, pid
        self.argv = list(argv)
        self.environ = {os.fsencode(k): os.fsencode(v) for k, v in environ.items()}
        self.script = script              # ("path", file) | ("module", name) | ("code", text)
        self.cwd = os.path.abspath(cwd)
        self.sys_path = None              # set by Runtime.start
        self.main = None
        self.private_names = set()        # modules of its own directory, imported by it
        self.private_modules = {}
        self.user_dirs = []
        self.atexit = []
        self.exit_code = None
        self.ended_ps = None
        self.rng = random.Random(runtime.seed * 1000003 + rank)
        self.context = None
        copy = (lambda kind: open(os.path.join(output_dir, f"{name}.{kind}"), "w")) \
            if output_dir else (lambda kind: None)
        self.stdout = _Output(f"[{name}] ", runtime.real_stdout, copy("out"))
        self.stderr = _Output(f"[{name}] ", runtime.real_stderr, copy("err"))

    @property
    def finished(self):
        return self.exit_code is not None


class _PrivateModuleFinder:
    """Notes which modules a process imports from its own directories, so that each process
    gets its own copy of them (another process importing the same helper gets a fresh one)."""

    def __init__(self, runtime):
        self._runtime = runtime

    def find_spec(self, name, path=None, target=None):
        proc = self._runtime.active
        if proc is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and any(origin.startswith(d + os.sep) for d in proc.user_dirs):
            proc.private_names.add(name)
            return spec
        return None


class Runtime:
    """The hosted processes of one launch and the patches that give each its own view."""

    def __init__(self, world, seed=0, epoch=1735689600.0, wall_clock=False):
        self.world = world
        self.seed = seed
        self.epoch = epoch                # time.time() at simulated time 0 (2025-01-01 UTC)
        self.wall_clock = wall_clock      # clocks read the host's real clock
        self.processes = {}               # sim process id -> Process
        self.active = None
        self.real_stdout, self.real_stderr = sys.stdout, sys.stderr
        self._base = None
        self._installed = False

    # --- switching ---------------------------------------------------------------------------

    def _save(self):
        return {"argv": sys.argv, "path": sys.path, "env": os.environ._data,
                "main": sys.modules.get("__main__"), "stdin": sys.stdin, "cwd": os.getcwd()}

    def _restore(self, saved):
        sys.argv, sys.path, os.environ._data = saved["argv"], saved["path"], saved["env"]
        if os.getcwd() != saved["cwd"]:
            os.chdir(saved["cwd"])
        sys.stdin = saved["stdin"]
        if saved["main"] is not None:
            sys.modules["__main__"] = saved["main"]

    def switch(self, sim_process):
        """Makes sim_process's view current (kvsim._core calls this on every change)."""
        new = self.processes.get(sim_process)
        old = self.active
        if new is old:
            return
        if old is not None:
            old.argv, old.sys_path, old.environ = sys.argv, sys.path, os.environ._data
            old.cwd = os.getcwd()
            for name in old.private_names:
                module = sys.modules.pop(name, None)
                if module is not None:
                    old.private_modules[name] = module
        else:
            self._base = self._save()
        if new is not None:
            sys.argv, sys.path, os.environ._data = new.argv, new.sys_path, new.environ
            if os.getcwd() != new.cwd:
                os.chdir(new.cwd)
            sys.modules["__main__"] = new.main
            sys.modules.update(new.private_modules)
            new.private_modules = {}
            sys.stdin = io.StringIO("")
            context._active = new.context
        else:
            self._restore(self._base)
            context._active = None
        self.active = new

    # --- patches -----------------------------------------------------------------------------

    def install(self):
        """Patches the interpreter for hosted processes (once); the launcher keeps the originals
        whenever no process is active."""
        if self._installed:
            return
        self._installed = True
        random.seed(self.seed)
        sys.stdout = _ProcessStream(self, "stdout", self.real_stdout)
        sys.stderr = _ProcessStream(self, "stderr", self.real_stderr)
        sys.meta_path.insert(0, _PrivateModuleFinder(self))
        rt = self

        def sim_seconds():
            return _core.now_ps() * 1e-12

        def hosted(name, fn):
            original = _real[name]

            def dispatch(*args, **kwargs):
                return fn(*args, **kwargs) if rt.active is not None else original(*args, **kwargs)
            dispatch.__name__ = getattr(original, "__name__", name)
            dispatch.__doc__ = getattr(original, "__doc__", None)
            return dispatch

        def clock(real_name, sim):
            if self.wall_clock:
                return _real[real_name]
            return hosted(real_name, sim)

        def sleep(seconds):
            if seconds < 0:
                raise ValueError("sleep length must be non-negative")
            _core.sleep(float(seconds))

        time.sleep = hosted("sleep", sleep)
        time.time = clock("time", lambda: rt.epoch + sim_seconds())
        time.time_ns = clock("time_ns", lambda: int(rt.epoch * 10**9) + _core.now_ps() // 1000)
        for name in ("monotonic", "perf_counter", "process_time"):
            setattr(time, name, clock(name, sim_seconds))
            setattr(time, name + "_ns", clock(name + "_ns", lambda: _core.now_ps() // 1000))
        os.getpid = hosted("getpid", lambda: rt.active.pid)
        os.getppid = hosted("getppid", lambda: 1)
        os._exit = hosted("_exit", _hosted_exit)
        os.urandom = hosted("urandom", lambda n: rt.active.rng.randbytes(n))
        os.system = hosted("system", lambda cmd: subprocess.call(cmd, shell=True) << 8)
        os.fork = hosted("fork", _no_fork)
        builtins.input = hosted("input", _no_input)

        def popen_init(popen, *args, **kwargs):
            if rt.active is not None:
                if kwargs.get("env") is None and len(args) < 10:
                    kwargs["env"] = dict(os.environ)
                kwargs.setdefault("cwd", rt.active.cwd)
            return _real["popen_init"](popen, *args, **kwargs)
        subprocess.Popen.__init__ = popen_init

        def thread_start(thread):
            if rt.active is not None:
                raise RuntimeError(
                    f"kvsim launch: process '{rt.active.name}' started a thread; threads of "
                    "hosted programs are not simulated (they would run outside simulated time)")
            return _real["thread_start"](thread)
        threading.Thread.start = thread_start

        def signal_handler(signum, handler):
            if rt.active is not None:  # the launcher keeps the process's signals
                return signal.SIG_DFL
            return _real["signal"](signum, handler)
        signal.signal = signal_handler

        def register(fn, *args, **kwargs):
            # weakref.finalize registers its interpreter-wide exit hook once, from whichever
            # code makes the first finalizer: run at a hosted program's exit, it would switch
            # off every finalizer of the interpreter (and leak their simulated memory).
            if rt.active is None or fn == weakref.finalize._exitfunc:
                return _real["atexit_register"](fn, *args, **kwargs)
            rt.active.atexit.append((fn, args, kwargs))
            return fn

        def unregister(fn):
            if rt.active is None:
                return _real["atexit_unregister"](fn)
            rt.active.atexit = [h for h in rt.active.atexit if h[0] != fn]
        atexit.register, atexit.unregister = register, unregister

        class datetime(_real["datetime"]):
            """datetime.now() and today() follow the process's clock (time.time)."""

            @classmethod
            def now(cls, tz=None):
                return cls.fromtimestamp(time.time(), tz)

            @classmethod
            def utcnow(cls):
                return cls.utcfromtimestamp(time.time())

            @classmethod
            def today(cls):
                return cls.fromtimestamp(time.time())

        class date(_real["date"]):
            @classmethod
            def today(cls):
                return cls.fromtimestamp(time.time())

        if not self.wall_clock:
            _datetime.datetime, _datetime.date = datetime, date
        _core._set_process_switch(self.switch)

    def uninstall(self):
        """Removes the switch callback and restores the launcher's streams."""
        _core._set_process_switch(None)
        self.switch(0)
        sys.stdout, sys.stderr = self.real_stdout, self.real_stderr

    # --- processes ---------------------------------------------------------------------------

    def add(self, process, visible_devices, node_devices, host_ip, extra_path):
        """Registers a Process with the world and prepares its __main__ and sys.path."""
        sim_id = self.world.add_process(process.name, process.node, visible_devices)
        process.sim_id = sim_id
        process.context = context.ProcessContext(
            name=process.name, rank=process.rank, node=process.node,
            visible_devices=list(visible_devices), node_devices=list(node_devices),
            host_ip=host_ip, pid=process.pid)
        kind, what = process.script
        main = type(sys)("__main__")
        main.__builtins__ = builtins
        first = ""
        if kind == "path":
            main.__file__ = os.path.abspath(os.path.join(process.cwd, what))  # as Python 3.9+
            first = os.path.dirname(main.__file__)
            process.user_dirs = [first]
        elif kind == "module":
            spec = importlib.util.find_spec(what)
            if spec is None or spec.origin is None:
                raise ValueError(f"process '{process.name}': no module named {what!r}")
            if spec.submodule_search_locations:
                spec = importlib.util.find_spec(what + ".__main__")
            main.__file__, main.__spec__ = spec.origin, spec
            process.argv[0] = spec.origin  # as python3 -m sets sys.argv[0]
            first = process.cwd
        else:
            first = ""
        main.__spec__ = getattr(main, "__spec__", None)
        process.main = main
        base = [p for p in sys.path[1:]]
        process.sys_path = [first] + list(extra_path) + base
        self.processes[sim_id] = process
        return sim_id

    def start(self, process):
        """Starts the program of `process` as its first simulated job."""
        return _core.spawn_process(process.sim_id, lambda: self._run(process), process.name)

    def _run(self, proc):
        kind, what = proc.script
        try:
            if kind == "code":
                code = compile(what, "<string>", "exec")
            else:
                with open(proc.main.__file__, "rb") as f:
                    code = compile(f.read(), proc.main.__file__, "exec")
            exec(code, proc.main.__dict__)
            proc.exit_code = 0
        except SystemExit as e:
            proc.exit_code = _exit_status(e.code)
        except HostedExit as e:
            proc.exit_code = int(e.code)
            proc.atexit = []
        except BaseException:  # noqa: B902 - a program's own error ends only that program
            traceback.print_exc()
            proc.exit_code = 1
        self._finish(proc)

    def kill(self, proc):
        """Ends a hosted program as SIGKILL would (a fault campaign's process_killed): no more of
        its code runs, no atexit handler, its engines vanish without a word to their peers and
        the driver frees its memory. False if it had already ended."""
        if proc.finished:
            return False
        if proc.context is not None:
            npu.release_process_memory(proc.context.state)
        self.world.kill_process(proc.sim_id, f"the process of '{proc.name}' was killed")
        proc.exit_code = 128 + signal.SIGKILL
        proc.atexit = []
        proc.ended_ps = _core.now_ps()
        proc.stdout.close()
        proc.stderr.close()
        return True

    def _finish(self, proc):
        """atexit handlers, then the library's own (llm_datadist finalizes at exit)."""
        while proc.atexit:
            fn, args, kwargs = proc.atexit.pop()
            try:
                fn(*args, **kwargs)
            except BaseException:  # noqa: B902
                print("Error in atexit._run_exitfuncs:", file=sys.stderr)
                traceback.print_exc()
        try:
            self.world.finalize_process(proc.sim_id)
        except Exception:  # noqa: B902 - as the library's shutdown handler, which only logs
            traceback.print_exc()
        if proc.context is not None:
            npu.release_process_memory(proc.context.state)
        proc.ended_ps = _core.now_ps()
        proc.stdout.close()
        proc.stderr.close()


def _exit_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _hosted_exit(code):
    raise HostedExit(code)


def _no_fork():
    raise OSError("kvsim launch: a hosted program cannot fork (it shares the simulation's "
                  "interpreter)")


def _no_input(prompt=""):
    raise EOFError("kvsim launch: hosted programs have no standard input")
