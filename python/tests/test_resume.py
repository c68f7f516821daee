"""Crash-safe sweeps: a `kvsim sweep` killed at any point (SIGKILL of the parent, or Ctrl-C)
leaves complete points and an INCOMPLETE marker, and `kvsim sweep --resume DIR` finishes it into
files identical to an uninterrupted sweep's."""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

import kvsim

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO = "scenarios/library/a2-llama70b-roce.yaml"
SETS = ["--set", "hardware.scale_out.bandwidth=50Gb/s,100Gb/s,200Gb/s,400Gb/s",
        "--set", "cache.block_tokens=16,64,128"]
ENV = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")


def cli_path():
    env = os.environ.get("KVSIM_CLI")
    if env:
        return env
    return str(pathlib.Path(kvsim._core.__file__).resolve().parents[2] / "sim" / "kvsim")


def sweep(out, *extra, **kw):
    return subprocess.Popen([cli_path(), "sweep", SCENARIO, *SETS, "-j", "2", "-o", str(out),
                             *extra], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def files(folder):
    # The sweep plot's title names its folder; everything else must match byte for byte.
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in ("sweep.png", "sweep.svg")}


def wait_for_points(folder, n, proc):
    while len(list(folder.glob("point-*/result.cbor"))) < n:
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "sweep"
    proc = sweep(out)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    assert not (out / "INCOMPLETE").exists()
    return files(out)


@pytest.mark.parametrize("after,how", [(1, signal.SIGKILL), (4, signal.SIGKILL), (2, signal.SIGINT)])
def test_killed_then_resumed_is_the_uninterrupted_sweep(tmp_path, uninterrupted, after, how):
    out = tmp_path / "sweep"
    proc = sweep(out)
    wait_for_points(out, after, proc)
    proc.send_signal(how)
    code = proc.wait(timeout=60)
    err = proc.stderr.read()
    assert code == (-signal.SIGKILL if how == signal.SIGKILL else 130), err
    if how == signal.SIGINT:
        assert f"resume with: kvsim sweep --resume {out}" in err
    assert (out / "INCOMPLETE").exists() and not (out / "sweep.csv").exists()
    # No half-written file reads as valid: every result.json present parses.
    for path in out.glob("point-*/result.json"):
        json.loads(path.read_text())
    # Resume from elsewhere: the sweep returns to where it was started.
    done = subprocess.run([cli_path(), "sweep", "--resume", str(out)], cwd="/", env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "points kept" in done.stderr
    assert not (out / "INCOMPLETE").exists()
    assert files(out) == uninterrupted


def test_resume_refuses_a_folder_of_another_schema(tmp_path):
    (tmp_path / "sweep.json").write_text(json.dumps({"schema": 99, "scenario": "x", "cwd": "/",
                                                     "axes": []}))
    out = subprocess.run([cli_path(), "sweep", "--resume", str(tmp_path)], env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "schema 99 (written by another kvsim); this kvsim reads schema 1" in out.stderr
    missing = subprocess.run([cli_path(), "sweep", "--resume", str(tmp_path / "nothing")],
                             env=ENV, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "not a sweep folder" in missing.stderr
