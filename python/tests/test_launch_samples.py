"""The programs of examples/launch/ (one per pattern of the library's official samples) under
kvsim launch, as their users would start them: each launch exits 0, every process logs its
milestones and its verification, some launches replay byte for byte, and a program whose gloo
rank 0 is not on MASTER_ADDR's host fails as it would on hardware."""
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

EXAMPLES = os.path.normpath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                         "examples", "launch"))


def two_hosts(script, first, second, prompt_args=(), decoder_args=()):
    """`--role p` on the first host, `--role d` on the second, each naming the other."""
    path = os.path.join(EXAMPLES, script)
    return ["--hosts", f"{first},{second}", "--",
            "python3", path, "--role", "p", *prompt_args, "--local_host_ip", first,
            "--remote_host_ip", second, ":::",
            "python3", path, "--role", "d", *decoder_args, "--local_host_ip", second,
            "--remote_host_ip", first]


def by_cluster(script, launch_options, prompt_args, decoder_args):
    path = os.path.join(EXAMPLES, script)
    return [*launch_options, "--", "python3", path, "--cluster_id", "1", *prompt_args, ":::",
            "python3", path, "--cluster_id", "2", *decoder_args]


XPYD = os.path.join(EXAMPLES, "xpyd_pull_blocks.py")

# program -> (kvsim launch arguments, {process: messages it must log}, node of each process)
LAUNCHES = {
    "layerwise_push.py": (
        two_hosts("layerwise_push.py", "10.10.10.1", "10.10.10.2"),
        {"p0": ["layer 3 ready", "transfer results: [<LLMStatusCode.LLM_SUCCESS: 0>]", "done"],
         "p1": ["every layer's K and V landed in blocks 5, 6, 7: tensor([[0., 0., 0.],", "done"]},
        [0, 1]),
    "push_cache.py": (
        two_hosts("push_cache.py", "10.10.10.1", "10.10.10.2", ["--device_id", "0"],
                  ["--device_id", "0"]),
        {"p0": ["registered cache 1 (6 tensors)",
                "prompt verified 6 tensors: pushed rows match byte for byte, other rows "
                "untouched",
                "layer 0 K, row 0 starts [30300, 30301, 30302, 30303]", "prompt finished"],
         "p1": ["the prompt's cache is 1",
                "pushed row 1 (layers 0-2) to prompt row 2 (layers 0-2)",
                "pushed row 3 (layers 1-2) to prompt row 0 (layers 0-1)", "decoder finished"]},
        [0, 1]),
    "push_blocks.py": (
        two_hosts("push_blocks.py", "10.10.10.1", "10.10.10.2"),
        {"p0": ["prompt verified all 6 blocks of 4 tensors after push_blocks",
                "unlinked from cluster 32 (force)", "push_blocks sample done"],
         "p1": ["decoder pushed blocks [0, 1, 2, 4] -> [5, 3, 4, 0] and [5] -> [1]",
                "unlinked from cluster 31 (force)", "push_blocks sample done"]},
        [0, 1]),
    "pull_cache_comm.py": (
        by_cluster("pull_cache_comm.py",
                   ["--hosts", "10.20.0.11,10.20.0.12", "--device-ips", "0=172.16.1.1",
                    "--device-ips", "1=172.16.2.1"],
                   ["--device_id", "3"], ["--device_id", "3"]),
        {"p0": ["comm domain 1 is up after 2 poll(s)",
                "allocated cache 1 from the pool with keys for requests [501, 502, 503]",
                "prompt removed its keys and deallocated its cache", "cluster 1 done"],
         "p1": ["comm domain 1 is up after 2 poll(s)", "pulled request 501 into row 2",
                "pulled request 502 into row 0",
                "decoder verified 4 tensors x 3 rows (131072 bytes pulled)", "cluster 2 done"]},
        [0, 1]),
    "pull_blocks_one_server.py": (
        by_cluster("pull_blocks_one_server.py", ["--nodes", "1", "--hosts", "10.30.0.5"],
                   ["--host_ip", "10.30.0.5"], ["--host_ip", "10.30.0.5"]),
        {"p0": ["cluster 1 uses NPU 0 of [0, 1]", "comm domain 1 ready", "cluster 1 finished"],
         "p1": ["cluster 2 uses NPU 1 of [0, 1]",
                "pulled blocks [1, 2, 3, 6] into [0, 1, 2, 5]: verified",
                "swapped out {0: 3, 1: 0, 2: 1, 5: 2}: CPU tensors verified",
                "swapped in {3: 7, 4: 6}: device tensors verified", "cluster 2 finished"]},
        [0, 0]),
    "pull_cache_to_blocks.py": (
        by_cluster("pull_cache_to_blocks.py",
                   ["--hosts", "10.40.1.1,10.40.2.1", "--device-ips", "0=192.168.40.11",
                    "--device-ips", "1=192.168.41.11"],
                   ["--device_id", "1", "--host_ip", "10.40.1.1", "--master_ip", "10.40.1.1"],
                   ["--device_id", "6", "--host_ip", "10.40.2.1", "--master_ip", "10.40.1.1"]),
        {"p0": ["rank table devices: [('10.40.1.1', '192.168.40.12'), "
                "('10.40.2.1', '192.168.41.17')]",
                "prompt registered rows for requests [7001, 7002]", "cluster 1 done"],
         "p1": ["request 7002: row pulled into blocks [6, 2, 9]",
                "request 7001: row pulled into blocks [0, 1]",
                "decoder verified 10 blocks x 6 tensors (5 written by pull_blocks)",
                "cluster 2 done"]},
        [0, 1]),
    "xpyd_pull_blocks.py": (
        ["--hosts", "10.50.0.1,10.50.0.2,10.50.0.3,10.50.0.9", "--names", "p1,p2,p3,d", "--",
         "python3", XPYD, "--role", "p", "--device_id", "0", "--local_ip_port",
         "10.50.0.1:26100", ":::",
         "python3", XPYD, "--role", "p", "--device_id", "2", "--local_ip_port",
         "10.50.0.2:26100", ":::",
         "python3", XPYD, "--role", "p", "--device_id", "4", "--local_ip_port",
         "10.50.0.3:26200", ":::",
         "python3", XPYD, "--role", "d", "--device_id", "0", "--local_ip_port",
         "10.50.0.9:26300", "--remote_ip_port", "10.50.0.1:26100;10.50.0.2:26100;10.50.0.3:26200"],
        {"p1": ["prompt 11209864734196: blocks registered, serving for 120 s",
                "10.50.0.1:26100 done"],
         "p2": ["10.50.0.2:26100 done"],
         "p3": ["prompt cluster 11209864865368 (10.50.0.3:26200) up on device 4",
                "10.50.0.3:26200 done"],
         "d": ["linked to 3 prompts in one call",
               "pulled blocks [3, 1] of 10.50.0.1:26100 into [0, 1]",
               "pulled blocks [3, 1] of 10.50.0.2:26100 into [2, 3]",
               "pulled blocks [3, 1] of 10.50.0.3:26200 into [4, 5]",
               "decoder verified 6 blocks from 3 prompts", "10.50.0.9:26300 done"]},
        [0, 1, 2, 3]),
    "switch_roles.py": (
        two_hosts("switch_roles.py", "10.60.0.1", "10.60.0.2", ["--device_id", "1"],
                  ["--device_id", "1"]),
        {"p0": ["A is now a decoder", "A links to B: ok",
                "A after B's push: all 6 blocks of 4 tensors verified", "A unlinks (force): ok",
                "cluster A done"],
         "p1": ["B links to A: ok", "B after pulling from A: all 6 blocks of 4 tensors verified",
                "B unlinks: ok", "B is now a prompt listening on 10.60.0.2:26600",
                "B pushed blocks [1, 0] to A's [5, 1], tensors [1, 2, 3] -> [0, 1, 2]",
                "B unlinks (force): ok", "cluster B done"]},
        [0, 1]),
    "hixl_both_ways.py": (
        two_hosts("hixl_both_ways.py", "10.70.0.1", "10.70.0.2", ["--device_id", "2"],
                  ["--device_id", "5"]),
        {"p0": ["cluster 41 (hixl backend) listening on 10.70.0.1:26700", "linked to cluster 42",
                "prompt pushed layer(s) [1]", "prompt verified its own cache is unchanged",
                "cluster 41 finished"],
         "p1": ["cluster 42 (hixl backend) listening on 10.70.0.2:26800", "linked to cluster 41",
                "decoder pulled layer(s) [0]",
                "decoder verified blocks [0, 1, 5, 6] of all 2 layers (pulled and pushed)",
                "cluster 42 finished"]},
        [0, 1]),
}

# Launched twice: stdout and stderr must be the same bytes.
REPLAYED = {"pull_blocks_one_server.py", "xpyd_pull_blocks.py"}

_LOG_LINE = re.compile(r"^\[([^\]]+)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (.*)$")


def launch(args, cwd):
    env = dict(os.environ)
    env.setdefault("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1")
    return subprocess.run([sys.executable, "-m", "kvsim.launch", "--timeout", "100", *args],
                          capture_output=True, env=env, cwd=cwd, timeout=150)


def logged(output):
    """{process: [messages]} of the logging lines ("[name] <asctime> message") in output."""
    out = {}
    for line in output.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            out.setdefault(match.group(1), []).append(match.group(2))
    return out


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The launches of the selected program tests, started at once and run two at a time:
    {program: [futures of CompletedProcess]} (two for a replayed program)."""
    programs = [item.callspec.params["program"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_program_runs_and_verifies_its_bytes"]
    cwd = tmp_path_factory.mktemp("launches")
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {p: [pool.submit(launch, LAUNCHES[p][0], cwd)] for p in programs}
    for p in programs:
        if p in REPLAYED:
            futures[p].append(pool.submit(launch, LAUNCHES[p][0], cwd))
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def test_every_program_in_examples_launch_has_a_launch_here():
    programs = {name for name in os.listdir(EXAMPLES) if name.endswith(".py")}
    assert programs == set(LAUNCHES)
    assert len(programs) >= 9


@pytest.mark.parametrize("program", sorted(LAUNCHES))
def test_program_runs_and_verifies_its_bytes(program, runs):
    _, messages, nodes = LAUNCHES[program]
    done = runs[program][0].result()
    text = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, text
    assert "Traceback" not in text
    got = logged(text)
    for process, wanted in messages.items():
        missing = [m for m in wanted if m not in got.get(process, [])]
        assert not missing, f"{process} did not log {missing}:\n{text}"
    for name, node in zip(messages, nodes):
        assert re.search(rf"^kvsim launch: {re.escape(name)} \(node {node}\) exited 0 at t=",
                         done.stderr.decode(), re.M), done.stderr.decode()
    if program in REPLAYED:
        again = runs[program][1].result()
        assert again.returncode == 0
        assert again.stdout == done.stdout
        assert again.stderr == done.stderr


def test_gloo_rank_0_off_the_master_host_fails_at_the_rendezvous(tmp_path):
    """push_cache.py, like the official samples, puts the gloo rendezvous (MASTER_ADDR) on the
    lower host address and gives rank 0 to the prompt. With the prompt on the higher host, its
    TCPStore serves on its own host (every address), so nobody finds a server at MASTER_ADDR:
    both ranks time out connecting, as Debian's torch 1.13 does between two network namespaces,
    and the launch fails in init_process_group, before any transfer."""
    path = os.path.join(EXAMPLES, "push_cache.py")
    args = ["--hosts", "10.10.10.1,10.10.10.2", "--",
            "python3", path, "--role", "d", "--local_host_ip", "10.10.10.1",
            "--remote_host_ip", "10.10.10.2", ":::",
            "python3", path, "--role", "p", "--local_host_ip", "10.10.10.2",
            "--remote_host_ip", "10.10.10.1"]
    done = launch(args, tmp_path)
    text = (done.stdout + done.stderr).decode()
    assert done.returncode == 1, text
    timeout = ("TimeoutError: The client socket has timed out after 20s while trying to connect "
               "to (10.10.10.1, 29610).")
    for process in ("p0", "p1"):
        assert f"[{process}] {timeout}" in text, text
        assert f"[{process}]     dist.init_process_group(" in text
    for process, node in (("p0", 0), ("p1", 1)):
        # torch's own connect loop (c10d tcputil: retry every second until the 20 s deadline)
        # gives up within the last second before it, in simulated time.
        end = re.search(rf"kvsim launch: {process} \(node {node}\) exited 1 at t=([0-9.]+) s",
                        text)
        assert end is not None and 19.0 <= float(end.group(1)) <= 20.0, text
    assert "pushed row" not in text and "prompt verified" not in text
