"""examples/launch/connector/: a P/D pair in a serving engine's KV connector shape (listener
threads, a ready Event, link from a listener thread, pulls on a ThreadPoolExecutor, "finished"
reports counted under a Lock) over stdlib TCP sockets and over ZeroMQ. Each launch runs in the
launch's network namespace, verifies every pulled byte, and replays bit for bit; under --strict
the pair breaks no API rule, and its --race variant (finalize after a sleep instead of after the
pulls) is reported and fails the launch, though its pulls happened to end in time."""
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.normpath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                       "examples", "launch", "connector", "pd_connector.py"))


def launch(transport, race=False):
    args = ["--strict", "--timeout", "100", "--hosts", "10.90.0.1,10.90.0.2", "--",
            "python3", SCRIPT, "--role", "p", "--host", "10.90.0.1", "--transport", transport,
            ":::", "python3", SCRIPT, "--role", "d", "--host", "10.90.0.2", "--prefill",
            "10.90.0.1", "--transport", transport] + (["--race"] if race else [])
    return subprocess.run([sys.executable, "-m", "kvsim.launch", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("transport", ["tcp", "zmq"])
def test_the_connector_pair_pulls_verifies_and_replays(transport):
    runs = [launch(transport) for _ in range(2)]
    done = runs[0]
    assert done.returncode == 0, done.stdout + done.stderr
    log = done.stderr  # logging's stream
    assert "[p1] " in log and "decode: pulled and checked requests [0, 1, 2, 3, 4, 5]" in log
    assert "[p0] " in log and "prefill: every request was reported finished" in log
    assert "p0 (node 0) exited 0" in done.stderr and "p1 (node 1) exited 0" in done.stderr
    assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)


@pytest.mark.parametrize("transport", ["tcp", "zmq"])
def test_the_race_variant_is_reported_and_fails_a_strict_launch(transport):
    done = launch(transport, race=True)
    assert "p0 (node 0) exited 0" in done.stderr and "p1 (node 1) exited 0" in done.stderr
    assert done.returncode == 3, done.stderr[-3000:]
    finding = done.stderr[done.stderr.index("rule broken (FinalizeWhileBusy)"):]
    assert "(6 pairs like this)" in finding.splitlines()[0]  # each pull against finalize
    pull, fin = finding.splitlines()[1:3]
    assert "p1 thread 'pull_0' at " + SCRIPT in pull and ": pull_blocks" in pull
    assert "p1 thread 'MainThread' at " + SCRIPT in fin and ": finalize" in fin
