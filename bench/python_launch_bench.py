"""Launched Python programs (issue 28's measures), each a median of ROUNDS runs on this machine:

1. Launch overhead: `kvsim launch` of N programs that run `import torch, llm_datadist`, against
   the same N commands started at once without kvsim (N = 2 and 16). Times whole commands.
2. Simulated calls per wall-second: one launched program whose T threads (T = 1 and 4) each
   make CALLS llm_datadist proxy calls (`LLMDataDist.cluster_id`, a round trip to the launcher
   that runs no model), timed inside the program with --wall-clock.
3. Memory of a 16-process launch (2P2D, TP4: one process per rank, each with an LLMDataDist and
   a registered 64 MiB NPU cache): the sum of every program's peak RSS plus the launcher's
   (its VmHWM, sampled every 0.2 s).

    /usr/bin/python3 bench/python_launch_bench.py [--rounds 3]     (PYTHONPATH=build/python)
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

IMPORT = "import torch, llm_datadist"


def launch_cmd(commands, *options):
    argv = [sys.executable, "-m", "kvsim.launch", "--timeout", "600", *options, "--"]
    for i, cmd in enumerate(commands):
        argv += ([":::"] if i else []) + cmd
    return argv


def wall(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(argv, **kw):
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:6]}... exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done


def overhead(n, rounds):
    env = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    bare_cmd = [sys.executable, "-c", IMPORT]

    def bare():
        procs = [subprocess.Popen(bare_cmd, env=env) for _ in range(n)]
        if any(p.wait() for p in procs):
            raise SystemExit("a bare import failed")
    launched = launch_cmd([["python3", "-c", IMPORT]] * n, "--nodes", str(n))
    kv = [wall(lambda: run(launched, env=env)) for _ in range(rounds)]
    base = [wall(bare) for _ in range(rounds)]
    k, b = statistics.median(kv), statistics.median(base)
    print(f"launch overhead, N={n:2d}: kvsim launch {k:6.2f} s, bare {b:6.2f} s, ratio {k / b:.2f}")


CALLS_PROGRAM = """
import sys, threading, time
from llm_datadist import LLMDataDist, LLMRole
threads, calls = int(sys.argv[1]), int(sys.argv[2])
dist = LLMDataDist(LLMRole.PROMPT, 1)
def work():
    for _ in range(calls):
        dist.cluster_id
start = time.perf_counter()
ts = [threading.Thread(target=work) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(threads * calls / (time.perf_counter() - start))
"""


def calls_per_second(threads, calls, rounds, scratch):
    path = os.path.join(scratch, "calls.py")
    with open(path, "w") as f:
        f.write(CALLS_PROGRAM)
    argv = launch_cmd([["python3", path, str(threads), str(calls)]], "--wall-clock")
    rates = []
    for _ in range(rounds):
        out = run(argv).stdout
        rates.append(float(out.split("]", 1)[1]))
    print(f"proxy calls per wall-second, {threads} thread(s): {statistics.median(rates):8.0f}")


RANK_PROGRAM = """
import resource, sys, torch
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMConfig, LLMDataDist, LLMRole,
                          Placement)
rank = int(sys.argv[1])
role = LLMRole.PROMPT if rank < 8 else LLMRole.DECODER
dist = LLMDataDist(role, rank + 1)
config = LLMConfig()
config.device_id = rank % 4
config.enable_cache_manager = True
dist.init(config.generate_options())
torch.npu.set_device(rank % 4)
tensors = [torch.zeros(256, 65536, dtype=torch.int16).npu() for _ in range(2)]  # 2 x 32 MiB
desc = CacheDesc(2, [256, 65536], DataType.DT_INT16, Placement.DEVICE)
cache = dist.cache_manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                                 BlocksCacheKey(rank + 1, 0))
dist.cache_manager.unregister_cache(cache.cache_id)
dist.finalize()
print("rss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def memory_16(scratch):
    path = os.path.join(scratch, "rank.py")
    with open(path, "w") as f:
        f.write(RANK_PROGRAM)
    launch_file = os.path.join(scratch, "launch.yaml")
    with open(launch_file, "w") as f:  # four instances of TP4: four ranks per node
        f.write("preset: atlas-a2\nnodes:\n" + "".join(
            f"  - {{host_ip: 10.80.0.{n + 1}}}\n" for n in range(4)) + "processes:\n" + "".join(
            f"  - {{name: r{r}, node: {r // 4}, command: [python3, {path}, '{r}']}}\n"
            for r in range(16)))
    proc = subprocess.Popen([sys.executable, "-m", "kvsim.launch", "--timeout", "600", "-f",
                             launch_file], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    launcher = 0  # peak RSS (KiB) of the launcher processes, read while they run
    while proc.poll() is None:
        launcher = max(launcher, launcher_rss(proc.pid))
        time.sleep(0.2)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the 16-process launch exited {proc.returncode}:\n{err[-2000:]}")
    done = subprocess.CompletedProcess(proc.args, 0, out, err)
    programs = [int(line.split()[-1]) for line in done.stdout.splitlines() if "rss_kib" in line]
    if len(programs) != 16:
        raise SystemExit(f"expected 16 programs' RSS, got {len(programs)}:\n{done.stdout}")
    total = sum(programs) + launcher
    print(f"16-process launch: programs' peak RSS {sum(programs) / 2**20:.2f} GiB (largest "
          f"{max(programs) / 2**10:.0f} MiB), launcher {launcher / 2**10:.0f} MiB, sum "
          f"{total / 2**20:.2f} GiB (goal <= 8 GiB)")


def launcher_rss(pid):
    """VmHWM (KiB) summed over `pid` and its descendants that run kvsim.launch itself (the
    launcher re-executes itself in a network namespace), not over the programs."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
            if b"kvsim.launch" in cmd:
                with open(f"/proc/{p}/status") as f:
                    total += next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration):
            continue
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvsim-bench-") as scratch:
        for n in (2, 16):
            overhead(n, args.rounds)
        for threads in (1, 4):
            calls_per_second(threads, args.calls // threads, args.rounds, scratch)
        memory_16(scratch)


if __name__ == "__main__":
    main()
