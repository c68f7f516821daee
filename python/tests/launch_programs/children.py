"""Child processes of a launched program (test_launch_children.py): subprocess, the Ascend tools,
os.fork with exec and waitpid, and multiprocessing with the fork and spawn start methods and a
Pool. Every child is a program of the launch on its parent's node: its clock is the simulated one
and its pid a launch pid."""
import multiprocessing as mp
import os
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
