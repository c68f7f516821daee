"""The API rule checker (kvsim.launch.rules): concurrency rules judged over the programs'
happens-before order, so that the verdict is the program's and not the schedule's.

The unit tests feed the checker calls by hand. The property test runs generated programs
(rule_programs.py: two threads per case, one kind of synchronisation or a decoy between their
calls) under several seeded thread schedules: every schedule must give exactly the findings
the generator expects, and the schedules must differ. A mutant that misses Event's edge must
be caught."""
import json
import os
import subprocess
import sys

import pytest

from kvsim.launch import rules

sys.path.insert(0, os.path.dirname(__file__))
import rule_programs  # noqa: E402


# --- the checker's judgement -------------------------------------------------------------------

def clock(**counts):
    """A clock from thread names t1, t2, ... (ids 1, 2, ...)."""
    return {int(k[1:]): v for k, v in counts.items()}


def at(thread, where, locks=(), **counts):
    return rules.Point(thread=thread, clock=clock(**counts), locks=frozenset(locks),
                       process="p0", thread_name=f"T{thread}", where=where)


def transfer(start, end, owner="p0/cluster 0", version=2, peers=(1,), cluster=0):
    return rules.Call(api="transfer_cache_async", owner=owner, cluster=cluster, version=version,
                      start=start, end=end, peers=frozenset(peers), seen_at="x")


def call(api, point, owner="p0/cluster 0", peers=(), cluster=0, version=2):
    return rules.Call(api=api, owner=owner, cluster=cluster, version=version, start=point,
                      end=point, peers=frozenset(peers))


def verdict(*calls):
    c = rules.Checker()
    c.calls.extend(calls)
    return [(f.rule, f.first.start.where, f.second.start.where) for f in c.findings()]


def test_two_transfers_no_edge_orders_are_a_finding():
    a = transfer(at(1, "a.py:1", t1=1), at(1, "a.py:2", t1=1))
    b = transfer(at(2, "a.py:5", t2=1), at(2, "a.py:6", t2=1))
    assert verdict(a, b) == [("ConcurrentTransfer", "a.py:1", "a.py:5")]


def test_an_edge_from_the_end_of_one_to_the_start_of_the_other_orders_them():
    a = transfer(at(1, "a.py:1", t1=3), at(1, "a.py:2", t1=3))
    b = transfer(at(2, "a.py:5", t1=3, t2=1), at(2, "a.py:6", t2=1))
    assert verdict(a, b) == []
    # An edge from before the end (t1 was at 2 when it released) does not.
    early = transfer(at(2, "a.py:5", t1=2, t2=1), at(2, "a.py:6", t2=1))
    assert verdict(a, early) == [("ConcurrentTransfer", "a.py:1", "a.py:5")]


def test_a_lock_held_across_both_calls_orders_them_and_a_lock_on_one_side_does_not():
    held = {("p0", 7, 1)}
    a = transfer(at(1, "a.py:1", held, t1=1), at(1, "a.py:2", held, t1=1))
    b = transfer(at(2, "a.py:5", {("p0", 7, 9)}, t2=1), at(2, "a.py:6", {("p0", 7, 9)}, t2=1))
    assert verdict(a, b) == []
    bare = transfer(at(2, "a.py:5", t2=1), at(2, "a.py:6", t2=1))
    assert verdict(a, bare) == [("ConcurrentTransfer", "a.py:1", "a.py:5")]
    # A task whose lock was released between the call and its synchronize is not covered.
    gap = transfer(at(2, "a.py:5", {("p0", 7, 9)}, t2=1), at(2, "a.py:6", {("p0", 7, 10)}, t2=1))
    assert verdict(a, gap) == [("ConcurrentTransfer", "a.py:1", "a.py:5")]


def test_a_task_no_thread_saw_finish_overlaps_later_calls():
    a = transfer(at(1, "a.py:1", t1=1), None)
    f = call("finalize", at(1, "a.py:9", t1=5))
    assert verdict(a, f) == [("FinalizeWhileBusy", "a.py:1", "a.py:9")]
    seen = transfer(at(1, "a.py:1", t1=1), at(1, "a.py:3", t1=2))
    assert verdict(seen, f) == []


def test_v1_pulls_and_transfers_on_one_link_from_either_end():
    t = transfer(at(1, "p.py:1", t1=1), at(1, "p.py:2", t1=1), owner="p0/cluster 0", version=1,
                 peers=(1,), cluster=0)
    pull = rules.Call(api="pull_blocks", owner="d0/cluster 1", cluster=1, version=1,
                      start=at(2, "d.py:4", t2=1), end=at(2, "d.py:4", t2=1),
                      peers=frozenset({0}))
    assert verdict(t, pull) == [("LinkCallOverlap", "d.py:4", "p.py:1")]
    v2 = transfer(at(1, "p.py:1", t1=1), at(1, "p.py:2", t1=1), version=2)
    assert verdict(v2, pull) == []  # v2 serialises them on the link's mutex (hixl)
    elsewhere = rules.Call(api="pull_blocks", owner="d0/cluster 1", cluster=1, version=1,
                           start=at(2, "d.py:4", t2=1), end=at(2, "d.py:4", t2=1),
                           peers=frozenset({5}))
    assert verdict(t, elsewhere) == []


def test_a_checker_that_ignores_locks_is_caught():
    """The lock unit case above fails if the lock test in rules.ordered is removed."""
    held = {("p0", 7, 1)}
    a = transfer(at(1, "a.py:1", held, t1=1), at(1, "a.py:2", held, t1=1))
    b = transfer(at(2, "a.py:5", {("p0", 7, 9)}, t2=1), at(2, "a.py:6", {("p0", 7, 9)}, t2=1))
    real = rules.ordered
    try:
        rules.ordered = lambda x, y: (x.end is not None and x.end.before(y.start)) or \
            (y.end is not None and y.end.before(x.start))
        assert verdict(a, b) != []
    finally:
        rules.ordered = real
    assert verdict(a, b) == []


def test_clock_bytes_decode_as_the_shim_encodes_them():
    import struct
    data = struct.pack("<I", 2) + struct.pack("<4I", 3, 7, 65540, 2)
    assert rules.decode_clock(data) == {3: 7, 65540: 2}
    assert rules.decode_clock(b"") == {}
    with pytest.raises(ValueError):
        rules.decode_clock(data[:-1])


# --- generated programs under many schedules ---------------------------------------------------

HOSTS = "10.91.0.1,10.91.0.2"


def run_program(tmp_path, text, schedule_seed, mutant=""):
    program = tmp_path / "rule_program.py"
    program.write_text(text)
    out = tmp_path / f"out-{schedule_seed}-{mutant or 'none'}"
    args = ["--timeout", "200", "--hosts", HOSTS, "--output-dir", str(out),
            "--schedule-seed", str(schedule_seed), "--",
            "python3", str(program), "p", "10.91.0.1", "10.91.0.2", mutant, ":::",
            "python3", str(program), "d", "10.91.0.2", "10.91.0.1"]
    done = subprocess.run([sys.executable, "-m", "kvsim.launch", *args], capture_output=True,
                          text=True, timeout=400)
    report = json.loads((out / "rules.json").read_text())
    found = {(f["rule"], frozenset({int(f["first"]["where"].rsplit(":", 1)[1]),
                                    int(f["second"]["where"].rsplit(":", 1)[1])}))
             for f in report["findings"]
             if f["first"]["where"].startswith(str(program))}
    order = [line.split(" ", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("[p0] ORDER ")]
    return done, found, order


@pytest.mark.parametrize("program_seed", [1, 2])
def test_the_verdict_is_the_programs_under_every_schedule(tmp_path, program_seed):
    text, expected, kinds = rule_programs.generate(program_seed)
    orders = set()
    for schedule_seed in (0, 1, 5, 11, 23, 42):
        done, found, order = run_program(tmp_path, text, schedule_seed)
        assert "p1 (node 1) exited 0" in done.stderr, done.stderr[-3000:]
        assert found == expected, (schedule_seed, kinds, sorted(found ^ expected, key=str),
                                   done.stderr[-3000:])
        orders.add(tuple(order))
    assert len(orders) > 1, "the seeded schedules all ran the threads in one order"


def test_a_checker_that_misses_an_event_edge_is_caught(tmp_path):
    text, expected, kinds = rule_programs.generate(1)
    _, found, _ = run_program(tmp_path, text, 0, mutant="event")
    assert found != expected
    assert found - expected, "the missed edge should show as a finding the program does not have"
