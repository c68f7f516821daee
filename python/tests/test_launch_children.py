"""A launched program's children join the world on its node (issue 28 item 2): subprocess (the
Ascend tools), os.fork with exec and waitpid, system, popen and posix_spawn, a blocking write to
a full pipe, multiprocessing with fork and spawn and a Pool.
Their clocks are simulated (a child's sleep moves the parent's time), their pids are launch pids,
and the launch replays bit for bit."""
import os
import subprocess
import sys

PROGRAM = os.path.join(os.path.dirname(__file__), "launch_programs", "children.py")


def launch():
    return subprocess.run([sys.executable, "-m", "kvsim.launch", "--timeout", "120", "--",
                           "python3", PROGRAM], capture_output=True, text=True, timeout=300)


def lines(done):
    return [line[len("[p0] "):] for line in done.stdout.splitlines() if line.startswith("[p0] ")]


def test_children_run_in_the_world_and_replay():
    done = launch()
    assert done.returncode == 0, done.stdout + done.stderr
    out = lines(done)
    assert out[0] == "parent 4000 0.0"
    assert out[1].startswith("hccn_tool 0 ['ipaddr:")
    # The child slept 0.5 s of simulated time, and the parent waited for it.
    child_pid, child_t = out[2].split()[2:4]
    assert 4000 < int(child_pid) and child_t == "0.5" and out[2].endswith("parent at 0.5"), out
    assert "exec'd child" in out and "waitpid 0" in out
    # system, popen and posix_spawn: the shell's sleep of 0.25 s passes in simulated time, and
    # each gives its child's status (glibc starts them with a clone no fork wrapper sees).
    assert "system 3 0.75" in out, out
    assert "popen from popen 1.0 2" in out, out
    assert "posix_spawn posix_spawn 0 1.25" in out, out
    assert "posix_spawn missing 2" in out  # an exec failure is the call's error (ENOENT)
    assert "subprocess close_fds=False 0" in out
    # 1 MiB into a 64 KiB pipe whose reader is another thread that starts after 0.25 s.
    assert "full pipe [1048576] 1.5" in out, out
    fork = next(x for x in out if x.startswith("fork "))
    spawn = next(x for x in out if x.startswith("spawn "))
    assert "('fork0', 40" in fork and ", 1.75)" in fork and fork.endswith("[0, 0] 1.75"), fork
    assert "('spawn0', 40" in spawn and spawn.endswith("[0, 0] 2.0"), spawn
    assert "pool [1, 2, 3]" in out
    again = launch()
    assert (again.stdout, again.stderr) == (done.stdout, done.stderr)
