"""kvsim.run and kvsim.sweep: results as Python objects, equal to what the kvsim command writes."""
import csv
import os
import pathlib
import signal
import subprocess
import sys

import pytest

import kvsim
from llm_datadist import LLMRole

from conftest import make_dist

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Small and fast: 8 layers, TP2, three 1k-token requests between two A2 nodes over RoCE.
SMALL = """\
question: How exposed is a small model's KV between two A2 nodes?
hardware:
  preset: atlas-a2
  scale_out:
    bandwidth: 100Gb/s
model:
  name: tiny
  layers: 8
  hidden: 2048
  intermediate: 8192
  heads: 16
  kv_heads: 8
  head_dim: 128
  tensor_parallel: 2
  dtype: bf16
cache:
  layout: paged
  block_tokens: 128
workload:
  requests: 3
  interval: 2ms
  prompt_tokens: 1024
prefill:
  device_tflops: 300
  efficiency: 0.5
transfer:
  method: layerwise
  api: 2
placement:
  prompt_node: 0
  decode_node: 1
"""
BANDWIDTH = "hardware.scale_out.bandwidth"


def cli_path():
    env = os.environ.get("KVSIM_CLI")
    if env:
        return env
    # Build tree: <build>/python/kvsim/_core*.so next to <build>/sim/kvsim.
    return str(pathlib.Path(kvsim._core.__file__).resolve().parents[2] / "sim" / "kvsim")


def cli(*args):
    out = subprocess.run([cli_path(), *args], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1"))
    assert out.returncode == 0, out.stderr
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("scenario") / "small.yaml"
    path.write_text(SMALL)
    return str(path)


@pytest.fixture(scope="module")
def cli_run(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-run")
    cli("run", small, "--set", f"{BANDWIDTH}=200Gb/s", "-o", str(out), "--no-report", "-q")
    return out


@pytest.fixture(scope="module")
def py_run(small):
    return kvsim.run(small, set={BANDWIDTH: "200Gb/s"})


def test_run_gives_the_cli_result_json_bit_for_bit(py_run, cli_run):
    assert py_run.to_json() == (cli_run / "result.json").read_text()
    assert py_run.json == py_run.to_json()
    assert py_run.summary == (cli_run / "summary.txt").read_text()
    assert py_run.overrides == {BANDWIDTH: "200Gb/s"}


def test_request_rows_are_the_cli_rows(py_run, cli_run):
    with open(cli_run / "requests.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(py_run.requests) == len(rows) == 3
    for r, c in zip(py_run.requests, rows):
        assert r.id == int(c["id"])
        assert r.prefill_end_us == pytest.approx(float(c["prefill_end_us"]), rel=1e-5)
        assert r.transfer_end_us == pytest.approx(float(c["transfer_end_us"]), rel=1e-5)
        assert r.exposed_us == pytest.approx(float(c["exposed_us"]), rel=1e-5, abs=1e-3)
        assert r.bytes == int(c["bytes"])
        assert r.status == c["status"] == "LLM_SUCCESS"
        assert r.verified and c["verified"] == "1"
        assert r.exposed_share_pct == pytest.approx(100 * r.exposed_us / r.ttft_us)
        assert r.effective_gbps > 0
    assert py_run.ok and py_run.exit_code == 0


def test_link_and_compute_rows_are_the_cli_rows(py_run, cli_run):
    with open(cli_run / "links.csv") as f:
        links = list(csv.DictReader(f))
    assert [l.name for l in py_run.links] == [l["link"] for l in links]
    for l, c in zip(py_run.links, links):
        assert l.bytes == pytest.approx(float(c["bytes"]), rel=1e-5)
        assert l.utilization == pytest.approx(float(c["utilization"]), rel=1e-5)
        assert 0 < l.utilization <= 1
    with open(cli_run / "compute.csv") as f:
        compute = list(csv.DictReader(f))
    assert len(py_run.compute) == len(compute) == 3 * 8
    for p, c in zip(py_run.compute, compute):
        assert (p.request, p.layer) == (int(c["request"]), int(c["layer"]))
        assert p.end_us == pytest.approx(float(c["end_us"]), rel=1e-5)
    assert py_run.diagnostics == (cli_run / "diagnostics.txt").read_text().splitlines()


def test_summary_figures_agree_with_the_rows(py_run):
    n = len(py_run.requests)
    assert py_run.figures["requests"] == n
    assert py_run.mean_exposed_us == pytest.approx(sum(r.exposed_us for r in py_run.requests) / n)
    assert py_run.effective_gbps == pytest.approx(
        sum(r.effective_gbps for r in py_run.requests) / n)
    assert py_run.line_rate_gbps == pytest.approx(200 / 8)
    rows = py_run.rows("links")
    assert type(rows[0]) is dict and set(rows[0]) == {"name", "type", "bytes", "utilization"}
    table = py_run.to_numpy("requests")
    assert table.shape == (3,) and list(table["id"]) == [0, 1, 2]
    with pytest.raises(ValueError):
        py_run.rows("nope")


def test_results_are_deterministic(small, py_run):
    again = kvsim.run(small, set=[f"{BANDWIDTH}=200Gb/s"])
    assert again.json == py_run.json
    assert again.compute == py_run.compute


def test_out_dir_writes_the_files_of_kvsim_run(small, tmp_path):
    cli_out, py_out = tmp_path / "cli", tmp_path / "py"
    cli("run", small, "-o", str(cli_out), "--no-report", "-q")
    kvsim.run(small, out_dir=py_out, report=False)
    names = sorted(p.name for p in cli_out.iterdir())
    assert "trace.json" in names and "result.json" in names
    assert sorted(p.name for p in py_out.iterdir()) == names
    for name in names:
        assert (py_out / name).read_bytes() == (cli_out / name).read_bytes(), name


def test_out_dir_with_report(small, tmp_path):
    kvsim.run(small, out_dir=tmp_path, progress=True)
    assert (tmp_path / "index.html").is_file() and (tmp_path / "timeline.png").is_file()


def test_sweep_is_the_cli_sweep(small, tmp_path):
    sets = {BANDWIDTH: ["25Gb/s", "100Gb/s", "400Gb/s"], "cache.block_tokens": [16, 128]}
    s = kvsim.sweep(small, set=sets, jobs=2, progress=False)
    assert len(s) == 6
    # The CLI's order: the first key outermost.
    assert [tuple(r.overrides.values()) for r in s] == [
        (b, t) for b in sets[BANDWIDTH] for t in ("16", "128")]
    cli("sweep", small, "--set", f"{BANDWIDTH}=25Gb/s,100Gb/s,400Gb/s",
        "--set", "cache.block_tokens=16,128", "-o", str(tmp_path), "--no-report", "-j", "2")
    assert s.csv == (tmp_path / "sweep.csv").read_text()
    for i, r in enumerate(s):
        assert r.json == (tmp_path / f"point-{i}" / "result.json").read_text()
    assert [row["point"] for row in s.rows()] == list(range(6))


def test_faster_links_never_slow_the_transfer_down(small):
    s = kvsim.sweep(small, set={"cache.block_tokens": [16, 128],
                                BANDWIDTH: ["25Gb/s", "100Gb/s", "400Gb/s"]}, progress=False)
    for block in (0, 3):
        curve = s[block:block + 3]
        exposed = [r.mean_exposed_us for r in curve]
        effective = [r.effective_gbps for r in curve]
        assert effective == sorted(effective), effective
        assert exposed == sorted(exposed, reverse=True), exposed
        assert effective[-1] > effective[0]


def test_sweep_progress_and_out_dir(small, tmp_path):
    seen = []
    s = kvsim.sweep(small, set=[f"{BANDWIDTH}=100Gb/s,400Gb/s"], jobs=1,
                    progress=lambda done, total: seen.append((done, total)), out_dir=tmp_path,
                    report=False)
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert (tmp_path / "sweep.csv").read_text() == s.csv
    assert (tmp_path / "point-1" / "result.json").read_text() == s[1].json


def test_scenarios_from_text_dicts_and_the_library(small, py_run):
    from_text = kvsim.run(SMALL, set={BANDWIDTH: "200Gb/s"})
    assert from_text.scenario == "<text>"
    assert from_text.data["requests"] == py_run.data["requests"]
    scenario = {
        "question": "Dict scenario",
        "hardware": {"preset": "atlas-a2", "scale_out": {"bandwidth": "200Gb/s"}},
        "model": {"name": "tiny", "layers": 8, "hidden": 2048, "intermediate": 8192,
                  "heads": 16, "kv_heads": 8, "head_dim": 128, "tensor_parallel": 2,
                  "dtype": "bf16"},
        "cache": {"layout": "paged", "block_tokens": 128},
        "workload": {"requests": 3, "interval": "2ms", "prompt_tokens": 1024},
        "prefill": {"device_tflops": 300, "efficiency": 0.5},
        "transfer": {"method": "layerwise", "api": 2},
        "placement": {"prompt_node": 0, "decode_node": 1},
    }
    from_dict = kvsim.run(scenario)
    assert from_dict.data["requests"] == py_run.data["requests"]
    lib = kvsim.run("a2-llama70b-roce", set={"workload.requests": 1})
    assert lib.scenario == os.path.join(kvsim.library_dir(), "a2-llama70b-roce.yaml")
    assert lib.ok and len(lib.requests) == 1


def test_bad_scenarios_and_keys_raise_typed_errors(small):
    with pytest.raises(ValueError, match=r"small\.yaml:\d+.*bogus"):
        kvsim.run(small, set={"workload.bogus": 1})
    with pytest.raises(ValueError, match=r"small\.yaml:\d+.*layout"):
        kvsim.run(small, set={"cache.layout": "diagonal"})
    with pytest.raises(ValueError, match="dotted"):
        kvsim.run(small, set={"cache..layout": "paged"})
    with pytest.raises(ValueError, match="<text>"):
        kvsim.run("question: [unclosed\nhardware: {}\n")
    with pytest.raises(FileNotFoundError):
        kvsim.run("no/such/scenario.yaml")
    with pytest.raises(ValueError, match="kvsim.sweep"):
        kvsim.run(small, set={BANDWIDTH: ["100Gb/s", "200Gb/s"]})
    with pytest.raises(TypeError):
        kvsim.run(small, set={BANDWIDTH: object()})
    # A bad value in any point fails before anything runs.
    with pytest.raises(ValueError, match="block_tokens"):
        kvsim.sweep(small, set={"cache.block_tokens": [128, 0]}, progress=False)


def test_a_failed_request_is_reported_not_raised():
    r = kvsim.run("a2-nic-failure")
    assert not r.ok and r.exit_code == 1
    assert any(q.status != "LLM_SUCCESS" for q in r.requests)


def test_the_scripts_world_is_left_alone(small, world):
    dist = make_dist(LLMRole.PROMPT, 1, 0, False)
    addr = kvsim.alloc(0, 4096)
    kvsim.write(addr, b"kept")
    gate, woke = kvsim.Event(), []
    job = kvsim.spawn(lambda: woke.append(gate.wait()), "waiter")  # suspended in the world
    kvsim.sleep(0.001)
    before = kvsim.now_ps()
    r = kvsim.run(small)
    assert r.ok
    assert world.alive and kvsim.current_world() is world
    assert kvsim.now_ps() == before and kvsim.read(addr, 4) == b"kept"
    gate.set()
    assert job.join() and woke == [True]
    dist.finalize()


def test_ctrl_c_stops_a_sweep_and_its_children():
    # Interrupted once its first point is done, with 23 points of ~0.2 s each still to run on two
    # jobs: seconds of margin, where four fast points once finished before the signal came.
    script = (
        "import os, kvsim\n"
        "def progress(done, total):\n"
        "    if done == 1:\n"
        "        print('started', flush=True)\n"
        "try:\n"
        "    kvsim.sweep('a2-llama70b-roce', set={'hardware.scale_out.bandwidth':\n"
        "                [f'{25 * k}Gb/s' for k in range(1, 25)],\n"
        "                'cache.block_table': ['scattered'], 'cache.block_tokens': [16]},\n"
        "                jobs=2, progress=progress)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        # Children from /proc, not pgrep: pgrep hangs with the sanitizer pass's runtime preloaded.
        "    def parent(pid):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/stat') as f:\n"
        "                return int(f.read().rsplit(')', 1)[1].split()[1])\n"
        "        except (OSError, ValueError, IndexError):\n"
        "            return None\n"
        "    left = [p for p in os.listdir('/proc') if p.isdigit() and parent(p) == os.getpid()]\n"
        "    print('interrupted', len(left), flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    assert p.stdout.readline().strip() == "started"
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert out.split() == ["interrupted", "0"], out


def test_points_without_results_raise_and_keep_the_others(small):
    too_big = 16_000_000  # prompt tokens whose KV cache does not fit the HBM
    with pytest.raises(RuntimeError, match="does not fit"):
        kvsim.run(small, set={"workload.prompt_tokens": too_big})
    with pytest.raises(kvsim.SweepError) as e:
        kvsim.sweep(small, set={"workload.prompt_tokens": [1024, too_big]}, progress=False)
    assert list(e.value.errors) == [1] and "does not fit" in e.value.errors[1]
    assert e.value.results[0].ok and e.value.results[1] is None
    with pytest.raises(ValueError, match="jobs"):
        kvsim.sweep(small, set={"workload.prompt_tokens": [1024]}, jobs=0)


def test_not_from_a_simulated_job(small, world):
    job = kvsim.spawn(lambda: kvsim.run(small), "runner")
    assert job.join()
    assert isinstance(job.exception, RuntimeError) and "simulated job" in str(job.exception)


def test_sweep_keys_as_cli_strings(small):
    s = kvsim.sweep(small, set=[f"{BANDWIDTH}=100Gb/s,400Gb/s,", "cache.block_tokens=128"],
                    progress=False)
    assert [r.overrides for r in s] == [{BANDWIDTH: "100Gb/s", "cache.block_tokens": "128"},
                                        {BANDWIDTH: "400Gb/s", "cache.block_tokens": "128"}]
    with pytest.raises(ValueError, match="no values"):
        kvsim.sweep(small, set={BANDWIDTH: []})
    with pytest.raises(ValueError, match="key=value"):
        kvsim.sweep(small, set=["=1"])


def test_serving_sweep_gives_percentiles_and_series(tmp_path):
    """A 2P2D serving study through kvsim.sweep: the figures of sweep.csv, result.json's serving
    block and the sampled series, equal to what the CLI writes."""
    text = SMALL.replace("placement:\n  prompt_node: 0\n  decode_node: 1\n",
                         "instances: {prefill: 2, decode: 2}\n"
                         "serving: {verify: 0.5, slo: {ttft: 50ms, tpot: 20ms}}\n")
    text = text.replace("  preset: atlas-a2\n", "  preset: atlas-a2\n  nodes: 2\n")
    text = text.replace("  requests: 3\n  interval: 2ms\n",
                        "  requests: 40\n  arrivals: {process: poisson, rate: 200}\n"
                        "  output_tokens: 8\n")
    path = tmp_path / "serving.yaml"
    path.write_text(text)
    sweep = kvsim.sweep(str(path), {BANDWIDTH: ["100Gb/s", "400Gb/s"]})
    for r in sweep:
        assert r.ok, r.summary
        assert r.serving["requests"] == 40
        assert r.serving["checked"] == 20 and r.serving["verified"] == 20
        assert r.ttft_p99_us >= r.ttft_p50_us > 0
        assert 0 <= r.slo_attainment <= 1
        assert len(r.series["time_us"]) > 0
        assert {"prefill0 queue", "decode1 running"} <= set(r.series)
        assert all(q.first_token_us >= q.transfer_end_us for q in r.requests)
    # A faster link never makes the KV later.
    assert sweep[1].kv_ready_p99_us <= sweep[0].kv_ready_p99_us
    cli("sweep", str(path), "--set", f"{BANDWIDTH}=100Gb/s,400Gb/s", "-o", str(tmp_path / "cli"),
        "--no-report")
    assert sweep.csv == (tmp_path / "cli" / "sweep.csv").read_text()
