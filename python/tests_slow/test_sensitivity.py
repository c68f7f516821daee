"""kvsim sensitivity: every uncertain preset parameter varied over its range, runs equal to
kvsim.run's, conclusions that follow the numbers, and a threshold that bisection places right."""
import json
import os
import pathlib
import subprocess

import pytest

import kvsim
from kvsim import sensitivity

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"
CLI = os.environ.get("KVSIM_CLI")


def test_runs_are_those_of_kvsim_run_and_cover_every_parameter(tmp_path):
    s = sensitivity.analyse("hixl-calibration", {"cache.block_tokens": ["128", "16384"]},
                            samples=3, seed=7, metric="effective_gbps", progress=False)
    keys = [p["key"] for p in s.params]
    assert "dma.descriptor_cost" in keys and "scale_up.efficiency" in keys
    assert len(s.rows) == 2 * (1 + 2 * len(keys) + 3)
    # One design checked against a plain run with the same override, bit for bit.
    low = next(r for r in s.rows if r["design"] == "low:dma.descriptor_cost" and r["grid"] == 0)
    plain = kvsim.run("hixl-calibration", {"cache.block_tokens": "128",
                                           "hardware.dma.descriptor_cost":
                                               low["values"]["dma.descriptor_cost"]})
    assert plain.figures["effective_gbps"] == low["effective_gbps"]
    assert low["values"]["dma.descriptor_cost"] == "800000ps"  # 0.8us, the preset's low
    # The sample is seeded: the same call gives the same values.
    again = sensitivity.analyse("hixl-calibration", {"cache.block_tokens": ["128", "16384"]},
                                samples=3, seed=7, metric="effective_gbps", progress=False)
    assert [r["values"] for r in again.rows] == [r["values"] for r in s.rows]
    # 16K blocks are descriptor-bound on A3: the descriptor cost tops the tornado there.
    bars, base = s.tornado(0)
    assert bars[0][0] == "dma.descriptor_cost" and bars[0][1] > base > bars[0][2]
    s.write(tmp_path)
    for name in ("sensitivity.json", "sensitivity.csv", "sensitivity.md", "tornado.png",
                 "band.png", "panel.html", "index.html"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "block_tokens 128 -> 16384 changes the effective KV bandwidth" in s.conclusions[0]


def test_a_flat_curve_threshold_is_found_and_is_right():
    # A2 HCCS inside one server (TP4 pair), 128-token blocks each its own descriptor (a fragmented
    # cache): 28 -> 112 GB/s cuts exposed time by ~10 % at the low HCCS descriptor cost and ~4 %
    # at the high one; with "flat" meaning under 6.5 %, the verdict flips in between.
    fixed = {"cache.block_tokens": "128", "cache.block_table": "scattered",
             "placement.decode_node": "0", "model.tensor_parallel": "4"}
    axes = {"hardware.scale_up.bandwidth": ["28GB/s", "112GB/s"]}
    axes.update({k: [v] for k, v in fixed.items()})
    s = sensitivity.analyse("a2-llama70b-roce", axes, samples=0, flat_pct=6.5,
                            params=["scale_up.descriptor_cost"], progress=False)
    assert len(s.thresholds) == 1, s.conclusions
    t = s.thresholds[0]
    assert t["key"] == "scale_up.descriptor_cost" and t["flat_if"] == ">"
    assert "the curve is flat only if scale_up.descriptor_cost >" in s.conclusions[0]
    ps = int(t["value"][:-2])
    step = (25_000_000 - 9_500_000) // 2**5  # the bisection's last bracket

    def change(cost_ps):
        a, b = (kvsim.run("a2-llama70b-roce", {"hardware.scale_up.bandwidth": bw, **fixed,
                                               "hardware.scale_up.descriptor_cost": f"{cost_ps}ps"})
                for bw in ("28GB/s", "112GB/s"))
        return abs(100 * (b.mean_exposed_us - a.mean_exposed_us) / a.mean_exposed_us)

    assert change(ps - step) >= 6.5 > change(ps + step)


def test_real_valued_parameters_are_not_rounded():
    s = sensitivity.analyse("a2-llama70b-roce", {"cache.block_tokens": ["128"]}, samples=4,
                            params=["fabric.oversubscription", "dma.engines"], progress=False)
    overs = [r["values"]["fabric.oversubscription"] for r in s.rows if r["design"].startswith("sample")]
    engines = [r["values"]["dma.engines"] for r in s.rows if r["design"].startswith("sample")]
    assert any("." in v for v in overs), overs          # a real number stays real
    assert all(v.isdigit() for v in engines), engines    # an engine count stays whole
    # Neither moves this flat-fabric run at all, and the words say so.
    assert "no parameter moves it" in s.conclusions[0]


def test_bad_input_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="metric must be one of"):
        sensitivity.analyse("a3-hccs", metric="speed", progress=False)
    with pytest.raises(ValueError, match="are not uncertain parameters"):
        sensitivity.analyse("a3-hccs", params=["dma.nope"], progress=False)
    with pytest.raises(ValueError, match="samples must be"):
        sensitivity.analyse("a3-hccs", samples=-1, progress=False)
    with pytest.raises(ValueError, match="no uncertain parameter"):
        sensitivity.analyse("a3-hccs", params=[], progress=False)
    with pytest.raises(ValueError, match="hardware.preset cannot be swept"):
        sensitivity.analyse("a3-hccs", {"hardware.preset": ["atlas-a2", "atlas-a3"]},
                            progress=False)


@pytest.mark.parametrize("scenario", sorted(p.stem for p in LIBRARY.glob("*.yaml")))
def test_every_library_scenario(scenario, tmp_path):
    # The command, as a user runs it (one-at-a-time only, to keep the tier short).
    done = subprocess.run([CLI, "sensitivity", scenario, "--samples", "0", "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads((tmp_path / "sensitivity.json").read_text())
    assert data["params"] and data["conclusions"]
    assert (tmp_path / "tornado.png").stat().st_size > 0
    if scenario == "a2-nic-failure":
        assert done.returncode == 1  # its requests fail by design; the analysis still reports
    else:
        assert done.returncode == 0, done.stdout + done.stderr


def test_values_that_cannot_move_the_answer_are_not_varied():
    # a2-llama70b-roce prices prefill itself and takes the comm-domain path: the preset's compute
    # and its hixl_cs costs cannot change its answer, so they are pinned (not varied).
    from kvsim import _core, results

    def pinned(overrides):
        source = results._source("a2-llama70b-roce")
        return {p["key"]: p["pinned"] for p in _core._uncertain(source, overrides)}

    plain = pinned([])
    assert plain["compute.gemm_efficiency"] and plain["paths.hixl_cs.scale_out.descriptor_cost"]
    assert not plain["scale_out.descriptor_cost"]
    cs = pinned([("transfer.path", "hixl_cs")])
    assert not cs["paths.hixl_cs.scale_out.descriptor_cost"]
