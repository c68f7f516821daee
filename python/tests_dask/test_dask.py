"""Sweeps on a Dask cluster (a LocalCluster of two worker processes): the same bits as a local
sweep, a worker killed mid-sweep loses and duplicates nothing, a failing point is reported while
the sweep goes on, and `kvsim sweep --dask` writes what the local CLI writes."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile

import pytest

distributed = pytest.importorskip("distributed")

import kvsim  # noqa: E402
from kvsim.results import SweepError  # noqa: E402

# 8 layers, TP2, a few 1k-token requests between two A2 nodes.
SCENARIO = """\
question: How exposed is a small model's KV between two A2 nodes?
hardware:
  preset: atlas-a2
model: {name: tiny, layers: 8, hidden: 2048, intermediate: 8192, heads: 16, kv_heads: 8,
        head_dim: 128, tensor_parallel: 2, dtype: bf16}
cache: {layout: paged, block_tokens: 128}
workload: {requests: 3, interval: 2ms, prompt_tokens: 1024}
prefill: {device_tflops: 300, efficiency: 0.5}
transfer: {method: layerwise, api: 2}
placement: {prompt_node: 0, decode_node: 1}
"""


def cli_path():
    env = os.environ.get("KVSIM_CLI")
    if env:
        return env
    return str(pathlib.Path(kvsim._core.__file__).resolve().parents[2] / "sim" / "kvsim")


# The workers' scratch space, removed with the module's last test (Dask's default leaves
# /tmp/dask-worker-space behind).
SCRATCH = pathlib.Path(tempfile.mkdtemp(prefix="kvsim-dask-test-"))


@pytest.fixture(scope="module", autouse=True)
def _remove_scratch():
    yield
    shutil.rmtree(SCRATCH, ignore_errors=True)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                       local_directory=str(SCRATCH))
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture()
def scenario(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(SCENARIO)
    return str(path)


def same(a, b):
    assert a.csv == b.csv
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.json == y.json  # every time to the picosecond, every double bit for bit


def test_dask_sweep_is_the_local_sweep(client, scenario):
    axes = {"hardware.scale_out.bandwidth": ["100Gb/s", "400Gb/s"], "cache.block_tokens": [16, 128]}
    seen = []
    remote = kvsim.sweep(scenario, axes, client=client, progress=lambda d, t: seen.append((d, t)))
    local = kvsim.sweep(scenario, axes, progress=False)
    same(remote, local)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # the progress bar follows the futures


def test_a_worker_killed_mid_sweep_loses_and_duplicates_nothing(scenario):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                       local_directory=str(SCRATCH))
    with distributed.Client(cluster) as c:
        pids = c.run(os.getpid)
        axes = {"workload.requests": [str(n) for n in range(40, 48)]}
        killed = []

        # At the first completion both workers hold tasks (8 points, 2 workers): the victim dies
        # with one in flight, which the scheduler must run again elsewhere.
        def kill_one(done, total):
            if not killed:
                victim = sorted(pids.values())[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)

        remote = kvsim.sweep(scenario, axes, client=c, progress=kill_one)
        assert killed
        assert set(c.run(os.getpid).values()) != set(pids.values())  # the nanny replaced it
    cluster.close()
    same(remote, kvsim.sweep(scenario, axes, progress=False))


def test_a_failing_point_reports_its_error_and_the_sweep_goes_on(client, scenario):
    # 16 M tokens parse, but their KV cache does not fit in HBM: the run fails, not the parse.
    axes = {"workload.prompt_tokens": ["1024", "16000000", "2048"]}
    with pytest.raises(SweepError) as e:
        kvsim.sweep(scenario, axes, client=client, progress=False)
    assert list(e.value.errors) == [1]
    assert "does not fit in HBM" in e.value.errors[1]
    assert e.value.results[0].ok and e.value.results[2].ok


def test_bad_input_fails_before_anything_runs(client, scenario):
    with pytest.raises(ValueError, match="cache.layout"):
        kvsim.sweep(scenario, {"cache.layout": ["paged", "ring"]}, client=client, progress=False)


def test_cli_dask_writes_what_the_local_cli_writes(tmp_path, scenario):
    env = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    common = ["sweep", scenario, "--set", "hardware.scale_out.bandwidth=100Gb/s,400Gb/s",
              "--no-report"]
    remote = subprocess.run([cli_path(), *common, "--dask", "local:2", "-o", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert remote.returncode == 0, remote.stderr
    local = subprocess.run([cli_path(), *common, "-o", str(tmp_path / "l")],
                           capture_output=True, text=True, timeout=300, env=env)
    assert local.returncode == 0, local.stderr
    for name in ["sweep.csv", "point-0/result.json", "point-1/requests.csv", "point-1/summary.txt"]:
        assert (tmp_path / "d" / name).read_bytes() == (tmp_path / "l" / name).read_bytes(), name
    bad = subprocess.run([cli_path(), *common, "--dask", "local:0", "-o", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "local:N needs N >= 1" in bad.stderr


def test_a_fault_campaign_on_dask_finds_what_the_local_one_finds(tmp_path):
    """kvsim launch --faults on a LocalCluster: each seed a task, the same faults and findings as
    the campaign run on local threads."""
    faults_dir = pathlib.Path(__file__).resolve().parents[2] / "examples" / "launch" / "faults"
    runs = {}
    for where in ("local", "dask"):
        extra = ["--dask", "local:2"] if where == "dask" else ["-j", "2"]
        done = subprocess.run(
            [os.environ.get("PYTHON", "/usr/bin/python3"), "-m", "kvsim.launch", "-f",
             "careless.yaml", "--faults", "1-4", "--output-dir", str(tmp_path / where), *extra],
            capture_output=True, text=True, timeout=600, cwd=faults_dir)
        assert done.returncode == 1, done.stderr
        summary = (tmp_path / where / "fault_campaign.json").read_text()
        runs[where] = [(r["seed"], r["faults"], r["findings"], r["replay"])
                       for r in json.loads(summary)["results"]]
    assert runs["dask"] == runs["local"]
    assert any(findings for _, _, findings, _ in runs["dask"])
