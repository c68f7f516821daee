"""Child processes of a launched program (test_launch_children.py): subprocess, the Ascend tools,
os.fork with exec and waitpid, the C library's system, popen and posix_spawn, and
multiprocessing with the fork and spawn start methods and a Pool. Every child is a program of the launch on its parent's node: its clock is the simulated one
and its pid a launch pid."""
import ctypes
import multiprocessing as mp
import os
import threading
import subprocess
import sys
import time

EPOCH = 1735689600  # the launch's wall clock starts at 2025-01-01


def now():
    return round(time.time() - EPOCH, 3)


def work(q, tag):
    time.sleep(0.25)
    q.put((tag, os.getpid(), now()))


if __name__ == "__main__":
    print("parent", os.getpid(), now())
    r = subprocess.run(["hccn_tool", "-i", "0", "-ip", "-g"], capture_output=True, text=True)
    print("hccn_tool", r.returncode, r.stdout.split())
    r = subprocess.run([sys.executable, "-c", "import os, time; time.sleep(0.5); "
                        f"print(os.getpid(), round(time.time() - {EPOCH}, 3))"],
                       capture_output=True, text=True)
    print("subprocess", r.returncode, r.stdout.strip(), "parent at", now())
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/echo", ["echo", "exec'd child"])
    print("waitpid", os.waitpid(pid, 0)[1])
    # The C library's own starters: their children are programs of the launch too.
    print("system", os.system("sleep 0.25; exit 3") >> 8, now())
    libc = ctypes.CDLL(None)
    libc.popen.restype = ctypes.c_void_p
    libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fgets.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    libc.pclose.argtypes = [ctypes.c_void_p]
    stream = libc.popen(b"sleep 0.25; echo from popen; exit 2", b"r")
    line = ctypes.create_string_buffer(64)
    libc.fgets(line, 64, stream)
    print("popen", line.value.decode().strip(), now(), libc.pclose(stream) >> 8)
    r, w = os.pipe()
    child = os.posix_spawn("/bin/sh", ["sh", "-c", "echo posix_spawn; sleep 0.25"], os.environ,
                           file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    print("posix_spawn", os.read(r, 64).decode().strip(), os.waitpid(child, 0)[1], now())
    os.close(r)
    try:
        os.posix_spawn("/no/such/tool", ["x"], os.environ)
    except FileNotFoundError as e:
        print("posix_spawn missing", e.errno)
    r = subprocess.run(["/bin/sh", "-c", "echo close_fds=False"], capture_output=True, text=True,
                       close_fds=False)  # subprocess uses posix_spawn here
    print("subprocess", r.stdout.strip(), r.returncode)
    # A blocking write to a full pipe waits in the world while another thread drains it.
    r, w = os.pipe()
    got = []
    reader = threading.Thread(target=lambda: (time.sleep(0.25), got.append(
        sum(len(b) for b in iter(lambda: os.read(r, 65536), b"")))))
    reader.start()
    os.write(w, b"x" * (1 << 20))
    os.close(w)
    reader.join()
    print("full pipe", got, now())
    for method in ("fork", "spawn"):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        procs = [ctx.Process(target=work, args=(q, f"{method}{i}")) for i in range(2)]
        for p in procs:
            p.start()
        got = sorted(q.get() for _ in procs)
        for p in procs:
            p.join()
        print(method, got, [p.exitcode for p in procs], now())
    with mp.get_context("spawn").Pool(2) as pool:
        print("pool", pool.map(abs, [-1, -2, -3]))
