"""Sweep points on a Dask distributed cluster (Debian's python3-distributed).

Each point is one Dask task. A worker simulates it as `kvsim sweep` does locally (a forked child
process with a fresh SystemC kernel) and sends back (exit code, error, encoded result). The client
decodes the result against its own parse of the scenario, so a point computed anywhere is bit for
bit the point computed here. A worker lost mid-sweep has its tasks rerun by the scheduler on
another worker; every point is collected from its one future, so nothing is lost or counted twice.
A task that fails outright (its workers kept dying, or it raised) becomes that point's error and
the sweep goes on.

Workers need kvsim's Python package (`cmake --install`, then PYTHONPATH) and, for scenarios with
relative trace files, those files at the same path: the scenario text itself travels with the task.
"""
import atexit
import os
import shutil
import tempfile
import uuid

from . import _core


def connect(address):
    """A dask.distributed Client for "local:N" (a LocalCluster of N one-thread worker processes)
    or a scheduler address ("tcp://host:8786")."""
    from distributed import Client, LocalCluster
    if address.startswith("local:"):
        try:
            n = int(address[len("local:"):])
        except ValueError:
            raise ValueError(f"--dask local:N needs a worker count, not {address!r}") from None
        if n < 1:
            raise ValueError(f"--dask local:N needs N >= 1, not {n}")
        # Workers' scratch space in a folder of this run's own, removed at exit (Dask's default
        # leaves /tmp/dask-worker-space behind).
        scratch = tempfile.mkdtemp(prefix="kvsim-dask-")
        atexit.register(shutil.rmtree, scratch, True)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address="127.0.0.1:0",
                               local_directory=scratch)
        return Client(cluster)
    return Client(address)


def _portable(source):
    """The scenario as text, so that workers need not see the scenario file."""
    if "path" not in source:
        return dict(source)
    path = source["path"]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return {"text": text, "origin": path, "base_dir": os.path.dirname(os.path.abspath(path))}


def _simulate_point(source, overrides):
    """Runs on a worker: one point, as `kvsim sweep` runs it, encoded for the trip back."""
    from kvsim import _core as core
    point, = core._run_points(source, [overrides], 1, False, None, None)
    return core._encode_point(point)


def run_points(client, source, points, progress=None):
    """The outcomes of `points` (lists of overrides) of one scenario source, in order, simulated on
    the cluster behind `client`; progress(done, total) as futures finish."""
    from distributed import as_completed
    portable = _portable(source)
    tag = uuid.uuid4().hex[:12]
    futures = [client.submit(_simulate_point, portable, list(p), key=f"kvsim-{tag}-{i}", pure=False)
               for i, p in enumerate(points)]
    index = {f.key: i for i, f in enumerate(futures)}
    encoded = [None] * len(points)
    done = 0
    for future in as_completed(futures):
        i = index[future.key]
        try:
            encoded[i] = future.result()
        except Exception as e:  # noqa: BLE001 - a failed task is that point's error
            encoded[i] = (2, f"task failed on the cluster: {type(e).__name__}: {e}", None)
        done += 1
        if progress is not None:
            progress(done, len(points))
    return [_core._decode_point(source, list(p), *enc) for p, enc in zip(points, encoded)]
