"""Scenario runs and sweeps from Python, with their results as Python objects.

``kvsim.run(scenario, set={...})`` and ``kvsim.sweep(scenario, set={key: [values]})`` do what
``kvsim run`` and ``kvsim sweep`` do (sim/point_runs.h): every point is simulated in its own
forked child process with a fresh SystemC kernel, so the numbers are those of the command, bit for
bit, and the script's own world (``kvsim.World``, its LLMDataDists, memory and time) is left as
it is.
"""
import json
import os
import sys

from kvsim import _core

__all__ = ["Result", "Row", "Sweep", "SweepError", "library_dir", "reports_dir", "run", "sweep"]


class Row(dict):
    """One row of a result table: a dict whose keys are also attributes."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class SweepError(RuntimeError):
    """Points of a sweep that produced no result (setup failed); the others are in `results`."""

    def __init__(self, message, results, errors):
        super().__init__(message)
        self.results = results  # one entry per point, None where it failed
        self.errors = errors    # {point index: message}


def library_dir():
    """The scenario library: $KVSIM_SCENARIO_LIBRARY, else the source tree's scenarios/library."""
    return os.environ.get("KVSIM_SCENARIO_LIBRARY") or os.path.join(
        _core._source_dir, "scenarios", "library")


def reports_dir():
    """Folder of kvsim_report.py: $KVSIM_REPORTS_DIR, else the source tree's reports/ (as the
    kvsim command)."""
    return os.environ.get("KVSIM_REPORTS_DIR") or os.path.join(_core._source_dir, "reports")


class Result:
    """One simulated scenario: the numbers `kvsim run` writes, as Python objects.

    Tables (lists of Row): ``requests`` (result.json's rows plus ``exposed_share_pct``; times in
    us, ``transfer_end_us`` is when the KV is ready on the decode side), ``links`` (bytes,
    utilisation), ``compute`` (prefill layer spans). Figures: the columns of sweep.csv as
    attributes (``mean_exposed_us``, ``effective_gbps``, ...). ``json`` is result.json's text.
    """

    def __init__(self, run_result, overrides):
        self._r = run_result
        self.overrides = dict(overrides)  # the point's dotted keys and values
        self.json = run_result.json
        self.summary = run_result.summary
        self.exit_code = run_result.exit_code
        self.ok = self.exit_code == 0  # every request succeeded and its bytes were verified
        self.data = json.loads(self.json)
        self.figures = Row(run_result.figures)
        self.requests = [_request_row(r) for r in self.data["requests"]]
        self.links = [Row(link) for link in self.data["links"]]
        self.compute = [Row(request=q, layer=l, start_us=s / 1e6, end_us=e / 1e6)
                        for q, l, s, e in run_result.compute]
        self.diagnostics = list(self.data["diagnostics"])
        self.scenario = self.data["scenario"]["origin"]
        self.question = self.data["scenario"]["question"]
        self.end_us = self.data["end_us"]
        self.line_rate_gbps = self.data["line_rate_gbps"]
        self.effective_rate_gbps = self.data["effective_rate_gbps"]
        # Serving studies: percentiles, SLO attainment, goodput (result.json "serving"), and the
        # sampled queues and link utilisation ({"time_us": [...], name: [...]}).
        self.serving = self.data.get("serving")
        self.series = self.data.get("series", {})

    def __getattr__(self, name):
        figures = self.__dict__.get("figures", {})
        if name in figures:
            return figures[name]
        raise AttributeError(name)

    def __repr__(self):
        keys = ", ".join(f"{k}={v}" for k, v in self.overrides.items())
        return (f"<kvsim.Result {self.scenario}{' ' + keys if keys else ''}: "
                f"{len(self.requests)} requests, mean exposed {self.mean_exposed_us:.1f} us, "
                f"{'ok' if self.ok else 'FAILED'}>")

    @property
    def trace_json(self):
        """The Chrome trace (empty unless run with trace=True)."""
        return self._r.trace_json

    def to_json(self):
        """result.json's text, byte for byte what `kvsim run` writes."""
        return self.json

    def rows(self, table="requests"):
        """A table ("requests", "links" or "compute") as a list of plain dicts."""
        return [dict(r) for r in _table(self, table)]

    def to_numpy(self, table="requests"):
        """A table as a numpy structured array (needs numpy)."""
        import numpy as np
        rows = _table(self, table)
        if not rows:
            return np.zeros(0)
        names = list(rows[0])
        columns = [np.asarray([r[n] for r in rows]) for n in names]
        return np.rec.fromarrays(columns, names=names)

    def to_pandas(self, table="requests"):
        """A table as a pandas DataFrame (needs pandas, which kvsim does not require)."""
        import pandas as pd
        return pd.DataFrame(self.rows(table))

    def write(self, out_dir, report=True):
        """Writes the files of `kvsim run` into out_dir; plots and index.html with report=True."""
        self._r.write(os.fspath(out_dir))
        if report:
            _render(out_dir)


class Sweep(list):
    """The results of a sweep, one per point in the order of `kvsim sweep`."""

    def __init__(self, results, axes, points):
        super().__init__(results)
        self.axes = axes  # [(key, [values])]
        self._points = points
        self.csv = _core._sweep_csv(axes, points)  # sweep.csv's text

    def rows(self):
        """One dict per point: the swept values, then the figures of sweep.csv."""
        out = []
        for i, r in enumerate(self):
            row = dict(r.overrides)
            row["point"] = i
            row.update(r.figures)
            row["status"] = "ok" if r.ok else "failed"
            out.append(row)
        return out

    def write(self, out_dir, report=True):
        """Writes what `kvsim sweep` writes: point-N/ folders, sweep.csv and, with report, plots."""
        _write_sweep(os.fspath(out_dir), self._points, self.csv, report)


def run(scenario, set=None, *, out_dir=None, report=True, trace=None, progress=False):
    """Simulates one scenario as `kvsim run` does and returns its Result.

    scenario: a path, a library name ("a2-llama70b-roce"), YAML text (with a line break) or a
    dict. set: {dotted.key: value} or ["key=value", ...] (the CLI's --set). out_dir: also write
    the files of `kvsim run` there (plots and index.html unless report=False). trace: keep the
    Chrome trace (default: when writing out_dir). progress: True prints requests done to stderr,
    a callable gets (done, total). A scenario or override the parser rejects raises ValueError
    naming file, line and key; a run that fails before it has results raises RuntimeError. A
    request that fails does not raise: see Result.ok and Result.requests.
    """
    source = _source(scenario)
    overrides = _run_overrides(set)
    keep_trace = (out_dir is not None) if trace is None else bool(trace)
    request_cb = None
    if progress:
        def request_cb(_point, done, total):
            if callable(progress):
                progress(done, total)
            else:
                sys.stderr.write(f"\r  simulated {done}/{total} requests")
                if done == total:
                    sys.stderr.write("\n")
                sys.stderr.flush()
    point, = _core._run_points(source, [overrides], 1, keep_trace, None, request_cb)
    if point.result is None:
        raise RuntimeError(f"{_origin(source)}: {point.error}")
    result = Result(point.result, overrides)
    if out_dir is not None:
        result.write(out_dir, report=report and keep_trace)
    return result


def sweep(scenario, set=None, *, jobs=None, out_dir=None, report=True, progress=True, client=None):
    """Simulates the cross product of the `set` values as `kvsim sweep` does; returns a Sweep.

    set: {dotted.key: [values]} (a scalar is a one-value axis) or ["key=v1,v2", ...] (the CLI's
    --set, values split at commas); None: the scenario's own sweep: section. Points run in
    parallel child processes (jobs, default: all cores), or as tasks on the Dask cluster of
    `client` (a dask.distributed Client; results are bit for bit a local run's), in the CLI's
    order (first key outermost). out_dir: also write point-N/ folders, sweep.csv and, with
    report, the sweep plots. progress: True draws the CLI's progress bar on stderr, a callable
    gets (points done, points). Raises ValueError for a bad scenario, key or value (before
    anything runs) and SweepError if points produced no result.
    """
    source = _source(scenario)
    if set is None:
        axes = _core._scenario_sweep(source)
        if not axes:
            raise TypeError("sweep needs set={key: [values]} or a scenario with a sweep: section")
    else:
        axes = _sweep_axes(set)
    points = _core._cross_product(axes)
    points_cb = None
    if progress:
        def points_cb(done, total):
            if callable(progress):
                progress(done, total)
                return
            sys.stderr.write("\r" + _core._progress_bar(done, total))
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()
    if jobs is None:
        jobs = os.cpu_count() or 1
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, not {jobs!r}")
    if client is not None:
        from . import on_dask
        _core._parse_points(source, points)  # a bad key or value fails before anything runs
        outcomes = on_dask.run_points(client, source, points, points_cb)
    else:
        outcomes = _core._run_points(source, points, jobs, False, points_cb, None)
    errors = {i: p.error for i, p in enumerate(outcomes) if p.result is None}
    results = [None if p.result is None else Result(p.result, p.overrides) for p in outcomes]
    if errors:
        if out_dir is not None:  # what the CLI writes, without plots of an incomplete sweep
            _write_sweep(os.fspath(out_dir), outcomes, _core._sweep_csv(axes, outcomes), False)
        lines = "; ".join(f"point {i}: {e}" for i, e in errors.items())
        raise SweepError(f"{_origin(source)}: {len(errors)} of {len(outcomes)} points have no "
                         f"result: {lines}", results, errors)
    study = Sweep(results, axes, outcomes)
    if out_dir is not None:
        study.write(out_dir, report=report)
    return study


def _run_list(source, points, jobs, progress=None):
    """Results of `points` (lists of overrides) of one scenario source, in order, each run as
    `kvsim run` runs it; RuntimeError naming the points that produced no result."""
    outcomes = _core._run_points(source, points, jobs, False, progress, None)
    bad = [(i, p.error) for i, p in enumerate(outcomes) if p.result is None]
    if bad:
        lines = "; ".join(f"{dict(points[i])}: {e}" for i, e in bad[:5])
        raise RuntimeError(f"{_origin(source)}: {len(bad)} of {len(points)} runs have no result: "
                           f"{lines}")
    return [Result(p.result, p.overrides) for p in outcomes]


def _request_row(r):
    row = Row(r)
    row["exposed_share_pct"] = 100 * r["exposed_us"] / r["ttft_us"] if r["ttft_us"] > 0 else 0.0
    return row


def _table(result, table):
    if table not in ("requests", "links", "compute"):
        raise ValueError(f"table must be 'requests', 'links' or 'compute', not {table!r}")
    return getattr(result, table)


def _source(scenario):
    if isinstance(scenario, dict):
        return {"text": json.dumps(scenario, indent=1), "origin": "<dict>",
                "base_dir": os.getcwd()}
    if isinstance(scenario, os.PathLike):
        scenario = os.fspath(scenario)
    if not isinstance(scenario, str):
        raise TypeError("scenario must be a path, a library name, YAML text or a dict, "
                        f"not {type(scenario).__name__}")
    if "\n" in scenario:
        return {"text": scenario, "origin": "<text>", "base_dir": os.getcwd()}
    if os.path.isfile(scenario):
        return {"path": scenario}
    for name in (scenario, scenario + ".yaml"):
        path = os.path.join(library_dir(), name)
        if os.path.isfile(path):
            return {"path": path}
    raise FileNotFoundError(f"scenario '{scenario}': no such file, nor in the library "
                            f"({library_dir()})")


def _origin(source):
    return source.get("path") or source["origin"]


def _text(key, value):
    if not isinstance(key, str):
        raise TypeError(f"set: keys must be dotted strings, not {type(key).__name__}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"set: '{key}' must be a str, int, float or bool, not {type(value).__name__}")


def _split(item):
    if not isinstance(item, str) or "=" not in item or item.startswith("="):
        raise ValueError(f"set: {item!r} must be 'key=value'")
    key, value = item.split("=", 1)
    return key, value


def _run_overrides(set_):
    if set_ is None:
        return []
    if isinstance(set_, dict):
        out = []
        for k, v in set_.items():
            if isinstance(v, (list, tuple)):
                raise ValueError(f"set: '{k}' has a list of values; kvsim.sweep runs lists")
            out.append((k, _text(k, v)))
        return out
    if isinstance(set_, str):
        set_ = [set_]
    return [_split(item) for item in set_]


def _sweep_axes(set_):
    if set_ is None:
        raise TypeError("sweep needs set={key: [values]}")
    if isinstance(set_, dict):
        axes = [(k, [_text(k, x) for x in (v if isinstance(v, (list, tuple)) else [v])])
                for k, v in set_.items()]
    else:
        items = [set_] if isinstance(set_, str) else set_
        axes = [(k, _core._split_values(v)) for k, v in (_split(item) for item in items)]
    for key, values in axes:
        if not values:
            raise ValueError(f"set: '{key}' has no values")
    return axes


def _render(out_dir):
    folder = reports_dir()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import kvsim_report
    return kvsim_report.render(os.fspath(out_dir))


def _write_sweep(out_dir, points, csv_text, report):
    os.makedirs(out_dir, exist_ok=True)
    for i, p in enumerate(points):
        if p.result is not None:
            p.result.write(os.path.join(out_dir, f"point-{i}"))
    with open(os.path.join(out_dir, "sweep.csv"), "w", encoding="utf-8") as f:
        f.write(csv_text)
    if report:
        _render(out_dir)
