"""kvsim launch --faults: seeded link faults and process kills on launched programs, the verdict
on what they did not handle, campaigns over many seeds, and the fault plan's errors."""
import json
import re
import os
import subprocess
import sys

import pytest

from kvsim.launch import faults
from kvsim.launch.spec import LaunchError, load_file

FAULTS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "launch",
                      "faults")


def launch(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "kvsim.launch", "--timeout", "300", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=FAULTS)


def pair_plan(path, faults_line, careful=False):
    """Writes a launch file at `path`: the example's prompt and decoder (careful or not) on two
    nodes, with the `faults:` mapping `faults_line`; returns its path as a string."""
    script = os.path.join(FAULTS, "pull_requests.py")
    flag = " --careful" if careful else ""
    path.write_text(
        "nodes: [{host_ip: 10.40.0.1}, {host_ip: 10.40.0.2}]\n"
        "processes:\n"
        f"  - {{name: prompt, node: 0, command: python3 {script} --role prompt{flag}}}\n"
        f"  - {{name: decoder, node: 1, command: python3 {script} --role decoder{flag}}}\n"
        f"faults: {faults_line}\n")
    return str(path)


def test_seeds_parse_as_lists_and_ranges_and_bad_ones_name_the_option():
    assert faults.parse_seeds("7") == [7]
    assert faults.parse_seeds("1-3,9") == [1, 2, 3, 9]
    for bad, why in (("x", "expected SEED"), ("5-2", "FIRST <= LAST"), ("-1", "expected SEED"),
                     ("1,1", "given twice"), ("0-10000", "at most 10000")):
        with pytest.raises(LaunchError, match=why) as e:
            faults.parse_seeds(bad)
        assert "--faults" in str(e.value)


def test_a_seed_draws_the_same_faults_every_time_inside_the_plan():
    plan = faults.FaultPlan(count=5, window=(0.01, 0.02), duration=(0.001, 0.002))
    candidates = [("node 0", ["roce n0d0", "roce n0d1"]), ("node 1", ["roce n1d0"])]
    first = faults.draw(plan, 42, candidates)
    assert first == faults.draw(plan, 42, candidates)
    assert first != faults.draw(plan, 43, candidates)
    for f in first:
        assert (f.target, f.links) in candidates and f.kind in faults.KINDS
        assert 0.01 <= f.at and 0.001 <= f.until - f.at <= 0.002
    assert [f.at for f in first] == sorted(f.at for f in first)
    for target, _ in candidates:  # faults on one target follow each other, never overlap
        mine = [f for f in first if f.target == target]
        assert all(a.until <= b.at for a, b in zip(mine, mine[1:]))
    with pytest.raises(LaunchError, match="no RoCE link to fail"):
        faults.draw(plan, 1, [])


def test_a_bad_fault_plan_names_file_line_and_key(tmp_path):
    path = tmp_path / "launch.yaml"
    for plan, why in (("{kinds: [meteor]}", "faults.kinds[0]: unknown fault kind 'meteor'"),
                      ("{window: [0.5, 0.1]}", "faults.window: [0.5, 0.1] must have FIRST <= LAST"),
                      ("{count: 0}", "faults.count: 0 is out of range"),
                      ("{factor: 2}", "faults.factor: 2.0 must be in (0, 1]"),
                      ("{scope: rack}", "faults.scope: 'rack' is not 'node' or 'nic'"),
                      ("{often: 1}", "faults.often: unknown key"),
                      ("{processes: []}", "faults.processes: no processes"),
                      ("{processes: [p0, router]}",
                       "faults.processes[1]: no process named 'router' in the launch "
                       "(its processes: p0)")):
        path.write_text(f"processes: [{{command: python3 x.py}}]\nfaults: {plan}\n")
        with pytest.raises(LaunchError, match=r"launch\.yaml:2: " + why.replace("[", r"\[")
                           .replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
            load_file(str(path), lambda preset, overrides: 8)


def test_bad_usage_exits_2_naming_the_option():
    done = launch("-f", "careless.yaml", "--faults", "3-1")
    assert done.returncode == 2 and "--faults '3-1'" in done.stderr
    done = launch("-f", "careless.yaml", "--fault-report", "x.json")
    assert done.returncode == 2 and "--fault-report needs --faults" in done.stderr
    done = launch("-f", "careless.yaml", "--faults", "3", "--dask", "local:2")
    assert done.returncode == 2 and "--dask runs a fault campaign" in done.stderr


def test_one_seed_replays_exactly_and_names_the_unhandled_fault(tmp_path):
    """A seed whose link outage meets the careless decoder's pulls: the decoder dies of the
    LLMException it did not catch, the prompt waits for it until its barrier times out; the same
    seed gives the same report again."""
    runs = [launch("-f", "careless.yaml", "--faults", "2", "--fault-report",
                   str(tmp_path / f"r{i}.json")) for i in range(2)]
    assert runs[0].stderr == runs[1].stderr
    report = json.loads((tmp_path / "r0.json").read_text())
    assert report["seed"] == 2 and len(report["faults"]) == 1
    assert report["faults"][0]["kind"] == "link_down"
    assert runs[0].returncode == 1
    by_process = {f["process"]: f for f in report["findings"]}
    assert by_process["decoder"]["kind"] == "uncaught"
    assert "LLMException: pull_cache: failed, error code is LLM_SUSPECT_REMOTE_ERROR" in \
        by_process["decoder"]["detail"]
    # The prompt waits at its barrier for the decoder; gloo sees the dead decoder's sockets
    # reset, as TCP resets them, and fails the barrier at once.
    assert "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer" in \
        by_process["prompt"]["detail"]
    assert "replay with: kvsim launch --timeout 300 -f careless.yaml --faults 2" in runs[0].stderr


def test_a_campaign_finds_the_careless_program_and_clears_the_careful_one(tmp_path):
    careless = launch("-f", "careless.yaml", "--faults", "1-6", "-j", "2",
                      "--output-dir", str(tmp_path / "careless"))
    assert careless.returncode == 1, careless.stderr
    summary = json.loads((tmp_path / "careless" / "fault_campaign.json").read_text())
    assert summary["seeds"] == 6 and summary["unhandled"] >= 1
    found = [r for r in summary["results"] if r["findings"]]
    assert all(r["faults"][0]["kind"] == "link_down" for r in found)
    assert any(f["kind"] == "uncaught" and "LLM_SUSPECT_REMOTE_ERROR" in f["detail"]
               for r in found for f in r["findings"])
    assert "replay: kvsim launch --timeout 300 -f careless.yaml --faults" in careless.stderr

    careful = launch("-f", "careful.yaml", "--faults", "1-6", "-j", "2",
                     "--output-dir", str(tmp_path / "careful"))
    assert careful.returncode == 0, careful.stderr
    summary = json.loads((tmp_path / "careful" / "fault_campaign.json").read_text())
    assert summary["unhandled"] == 0
    # The same seeds drew the same faults for both programs.
    assert [r["faults"] for r in summary["results"]] == \
        [r["faults"] for r in json.loads(
            (tmp_path / "careless" / "fault_campaign.json").read_text())["results"]]


def test_process_kills_draw_their_victims_from_the_plan_and_name_unknown_ones():
    plan = faults.FaultPlan(kinds=("process_killed",), count=6, window=(0.01, 0.02),
                            processes=("prompt",))
    drawn = faults.draw(plan, 7, [], ["prompt", "decoder"])
    assert drawn == faults.draw(plan, 7, [], ["prompt", "decoder"])
    assert {faults.victim(f) for f in drawn} == {"prompt"}
    assert all(f.links == [] and 0.01 <= f.at <= 0.02 for f in drawn)
    anyone = faults.draw(faults.FaultPlan(kinds=("process_killed",), count=20), 7, [],
                         ["prompt", "decoder"])
    assert {faults.victim(f) for f in anyone} == {"prompt", "decoder"}
    assert "process prompt killed (SIGKILL) at t=" in drawn[0].describe()
    # Link kinds only: the draws of existing plans are what they were before kills existed.
    links = [("node 0", ["roce n0d0"]), ("node 1", ["roce n1d0"])]
    assert faults.draw(faults.FaultPlan(count=3), 5, links) == \
        faults.draw(faults.FaultPlan(count=3), 5, links, ["prompt", "decoder"])


def test_device_oom_draws_a_node_s_devices_or_one_device_and_keeps_older_draws():
    devices = [("node 0", [0, 1]), ("node 1", [2, 3])]
    plan = faults.FaultPlan(kinds=("device_oom",), count=4, window=(0.01, 0.02),
                            duration=(0.5, 0.5))
    drawn = faults.draw(plan, 3, [], (), devices)
    assert drawn == faults.draw(plan, 3, [], (), devices)
    assert all(f.kind == "device_oom" and f.links == [] and (f.target, f.devices) in devices
               for f in drawn)
    # One target's windows never overlap: a later one starts when the earlier one ends.
    for a, b in zip(drawn, drawn[1:]):
        if a.target == b.target:
            assert b.at >= a.until
    assert re.match(r"node \d's devices out of memory from t=0\.0\d+ s to t=", drawn[0].describe())
    with pytest.raises(LaunchError, match="no device to fail"):
        faults.draw(plan, 3, [], (), [])
    # Link kinds only: the draws of existing plans are what they were before device_oom existed.
    links = [("node 0", ["roce n0d0"]), ("node 1", ["roce n1d0"])]
    assert faults.draw(faults.FaultPlan(count=3), 5, links) == \
        faults.draw(faults.FaultPlan(count=3), 5, links, (), devices)


def test_a_device_out_of_memory_while_a_program_allocates_is_its_error_and_replays(tmp_path):
    """The careless prompt allocates its rows while node 0's HBM is full: the allocation's
    error ends it (a finding), and the same seed gives the same report again."""
    plan = pair_plan(tmp_path / "oom.yaml", "{kinds: [device_oom], window: [0.0, 0.0], "
                     "duration: [5.0, 5.0], scope: node}")
    runs = [launch("-f", plan, "--faults", "4", "--fault-report",
                   str(tmp_path / f"r{i}.json")) for i in range(2)]
    assert runs[0].stderr == runs[1].stderr
    assert runs[0].returncode == 1, runs[0].stderr
    report = json.loads((tmp_path / "r0.json").read_text())
    assert [f["kind"] for f in report["faults"]] == ["device_oom"]
    by_process = {f["process"]: f for f in report["findings"]}
    victim_node = report["faults"][0]["target"]
    who = "prompt" if victim_node == "node 0" else "decoder"
    assert by_process[who]["kind"] == "uncaught"
    assert re.search(r"LLMException: nbytes: \d+ bytes do not fit device \d+", by_process[who][
        "detail"]), by_process


def test_completion_delays_draw_devices_carry_the_delay_and_keep_older_draws():
    devices = [("node 0", [0, 1]), ("node 1", [8, 9])]
    plan = faults.FaultPlan(kinds=("completion_delay",), count=3, delay=0.5)
    drawn = faults.draw(plan, 2, [], (), devices)
    assert [f.kind for f in drawn] == ["completion_delay"] * 3
    assert all(f.delay == 0.5 and f.links == [] and (f.target, f.devices) in devices
               for f in drawn)
    assert "copy completions 0.5 s late from t=" in drawn[0].describe()
    oom = faults.draw(faults.FaultPlan(kinds=("device_oom",), count=3), 2, [], (), devices)
    assert [(f.target, f.at, f.until) for f in oom] == [(f.target, f.at, f.until) for f in drawn]


def test_late_completions_time_the_careless_decoder_s_pull_out(tmp_path):
    """Seed 4 makes node 1's copy completions 2 s late while the decoder pulls: the careless
    decoder's pull_cache waits the library's llm.SyncKvCacheWaitTime (1 s), raises LLM_TIMEOUT
    and dies of it (a finding); the careful one gives the prompt up at its deadline and exits 0."""
    for careful in (False, True):
        plan = pair_plan(tmp_path / f"late{careful}.yaml", "{kinds: [completion_delay], "
                         "window: [1.03, 1.04], duration: [2.0, 2.0], delay: 2.0}", careful)
        done = launch("-f", plan, "--faults", "4")
        assert "node 1's devices' copy completions 2 s late from t=1.031032 s" in done.stderr
        if careful:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode == 1, done.stderr
            assert "LLMException: pull_cache: failed, error code is LLM_TIMEOUT" in done.stderr


def test_a_stalled_transfer_queue_times_the_careless_decoder_s_pull_out(tmp_path):
    """Seed 4 stalls node 1's transfer queues for 2 s while the decoder pulls: its pull_cache
    waits in the queue past its 1 s, and the careless decoder dies of LLM_TIMEOUT."""
    plan = pair_plan(tmp_path / "stall.yaml",
                     "{kinds: [queue_stall], window: [1.03, 1.04], duration: [2.0, 2.0]}")
    done = launch("-f", plan, "--faults", "4")
    assert "node 1's devices' transfer queues stalled from t=1.031032 s" in done.stderr
    assert done.returncode == 1, done.stderr
    assert "LLMException: pull_cache: failed, error code is LLM_TIMEOUT" in done.stderr


def test_a_lifecycle_trigger_must_name_a_call_and_shifts_nothing_until_it_fires(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("processes: [{name: a, command: python3 x.py}]\n"
                   "faults: {kinds: [process_killed], during: handshake}\n")
    done = launch("-f", str(bad), "--faults", "1")
    assert done.returncode == 2
    assert "'handshake' is not a lifecycle call (one of init, link_clusters" in done.stderr
    plan = faults.FaultPlan(kinds=("process_killed",), during="link_clusters", window=(0, 0))
    drawn = faults.draw(plan, 1, [], ("prompt",))
    assert drawn[0].trigger == "link_clusters" and drawn[0].at == 0.0
    assert drawn[0].describe() == \
        "process prompt killed (SIGKILL) at t=0.000000 s (from the first link_clusters call)"


def test_the_prompt_dying_as_the_decoder_enters_link_clusters(tmp_path):
    """vLLM's finding (a decode side that waited forever when its prefill peer died during the
    handshake) as a lifecycle trigger: the prompt is killed as the decoder's link_clusters is
    dispatched. The library's call fails (LLM_LINK_FAILED) rather than hangs; the careless
    decoder dies of it, the careful one gives the prompt up and exits 0."""
    for careful in (False, True):
        plan = pair_plan(tmp_path / f"trigger{careful}.yaml", "{kinds: [process_killed], "
                         "processes: [prompt], window: [0.0, 0.0], during: link_clusters}", careful)
        done = launch("-f", plan, "--faults", "1")
        assert "process prompt killed (SIGKILL) at t=1.030080 s (from the first link_clusters " \
            "call)" in done.stderr, done.stderr
        if careful:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode == 1, done.stderr
            assert "link_clusters failed: LLMStatusCode.LLM_LINK_FAILED" in done.stderr


def test_a_kill_campaign_finds_the_careless_programs_and_clears_the_careful_ones(tmp_path):
    careless = launch("-f", "careless_kills.yaml", "--faults", "1-4", "-j", "2",
                      "--output-dir", str(tmp_path / "careless"))
    assert careless.returncode == 1, careless.stderr
    summary = json.loads((tmp_path / "careless" / "fault_campaign.json").read_text())
    assert summary["unhandled"] >= 1
    for r in summary["results"]:
        victim = faults.victim(faults.Fault(**{k: v for k, v in r["faults"][0].items()
                                               if k != "describe"}))
        # The killed process is the fault, never a finding; the survivor's end is.
        assert all(f["process"] != victim for f in r["findings"]), r
    careful = launch("-f", "careful_kills.yaml", "--faults", "1-4", "-j", "2",
                     "--output-dir", str(tmp_path / "careful"))
    assert careful.returncode == 0, careful.stderr
    assert "4 seeds, 0 with an unhandled fault" in careful.stderr
    seed_dir = tmp_path / "careful" / "seed-1"
    report = json.loads((seed_dir / "faults.json").read_text())
    assert report["faults"][0]["kind"] == "process_killed" and report["findings"] == []


def test_a_killed_process_replays_exactly_and_its_peer_sees_the_library_error(tmp_path):
    runs = [launch("-f", "careful_kills.yaml", "--faults", "3") for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stderr == runs[1].stderr
    assert "was killed by the fault at t=" in runs[0].stderr
    assert "every injected fault was handled" in runs[0].stderr


def test_a_survivor_s_monitored_barrier_fails_when_the_dead_peer_s_sockets_reset():
    """Seed 4 kills the decoder: its sockets reset, as TCP resets a dead process's, so the
    careful prompt's monitored_barrier(timeout=30 s) fails at once (gloo sees the connection
    closed), handles it, and exits 0 long before its 30 s or the group's 60 s."""
    done = launch("-f", "careful_kills.yaml", "--faults", "4")
    assert done.returncode == 0, done.stderr
    assert "process decoder killed (SIGKILL) at t=1.035158 s" in done.stderr
    assert "Rank 1 failed to pass monitoredBarrier in 30000 ms" in done.stderr
    assert "Connection closed by peer [10.40.0.2]" in done.stderr
    end = re.search(r"prompt \(node 0\) exited 0 at t=([0-9.]+) s", done.stderr)
    assert end is not None and 1.035158 < float(end.group(1)) < 2.0, done.stderr


def test_seeds_replace_the_campaigns_options_but_never_the_programs_words():
    argv = ["--faults", "1-3", "-j", "2", "--output-dir", "out", "--", "python3", "x.py", "-j",
            "4", "--faults", "9"]
    assert faults._one_seed(argv, 2, faults._CAMPAIGN_OPTIONS) == [
        "--output-dir", "out", "--faults", "2", "--", "python3", "x.py", "-j", "4", "--faults", "9"]
    assert faults.replay_command(argv, 2) == \
        "kvsim launch --faults 2 -- python3 x.py -j 4 --faults 9"
