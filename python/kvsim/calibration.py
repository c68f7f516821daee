"""Refits fitted values to the published rows they came from, with leave-one-out error.

``kvsim calibrate NAME`` reads scenarios/calibration/NAME.yaml (a preset, a scenario, a metric
and the published rows, each a set of overrides and a figure), takes the values whose
``uncertain:`` entry says ``fitted_to: NAME`` (in the preset, or in the engine profiles of
scenarios/engines.yaml), and fits them within their plausible ranges by minimising the squared
log error over the rows (coordinate descent with a golden-section search per value, on a log
scale where the range spans a factor of 4 or more). Then, for every row, it fits on the other
rows and predicts that one: the leave-one-out error says how well the model predicts a row it
was not fitted to. Deterministic: no random start, no wall clock.

Metrics: those of ``kvsim validate`` (effective_gbps, exposed_ms, ttft_ms, tpot_ms; simulated,
averaged over the requests), and layer_linear_us (one prefill layer's projections, MLP, weight reads,
elementwise passes and kernel overhead on one rank, from the compute model alone: what an
operator profile such as Vidur's measures).
"""
import argparse
import json
import math
import os
import sys

import yaml

from kvsim import _core
from kvsim import results as _results
from kvsim import sensitivity as _sensitivity
from kvsim import validation as _validation

__all__ = ["calibration_dir", "calibrate", "main"]

GOLDEN = (math.sqrt(5) - 1) / 2


def calibration_dir():
    """scenarios/calibration: $KVSIM_CALIBRATION_DIR, else the source tree's."""
    return os.environ.get("KVSIM_CALIBRATION_DIR") or os.path.join(
        _core._source_dir, "scenarios", "calibration")


METRICS = (*_validation.UNITS, "layer_linear_us")


class _Model:
    """Predicts the dataset's rows with given values of the fitted keys; caches every run."""

    def __init__(self, folder, data, jobs, overrides):
        self.source = _results._source(os.path.normpath(os.path.join(folder, data["scenario"])))
        self.preset = data["preset"]
        self.metric = data.get("metric", "effective_gbps")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {self.metric!r}")
        self.rows = data["rows"]
        for i, row in enumerate(self.rows):
            row.setdefault("published", row.get("published_gbps"))
            if not isinstance(row["published"], (int, float)) or row["published"] <= 0:
                raise ValueError(f"row {i} ({row.get('label')}): published must be a positive "
                                 "number")
        self.jobs = jobs
        self.overrides = overrides  # {fitted key: the override key that sets it}
        self.cache = {}
        self.runs = 0

    def _points(self, values, rows):
        points = []
        for i in rows:
            sets = [("hardware.preset", self.preset)]
            sets += [(k, str(v)) for k, v in self.rows[i]["set"].items()]
            sets += [(self.overrides[k], v) for k, v in values.items()]
            points.append(sets)
        return points

    def predict(self, values, rows):
        """The metric of each row index in `rows` with the fitted keys at `values` ({key: text})."""
        tag = tuple(sorted(values.items()))
        want = [i for i in rows if (i, tag) not in self.cache]
        if want:
            points = self._points(values, want)
            if self.metric == "layer_linear_us":
                got = [1e6 * (c["total"] - c["attention"] - c["allreduce"])
                       for c in _core._layer_costs(self.source, points)]
            else:
                got = [_validation._metric(r, self.metric)
                       for r in _results._run_list(self.source, points, self.jobs)]
            self.runs += len(points)
            for i, g in zip(want, got):
                self.cache[(i, tag)] = g
        return [self.cache[(i, tag)] for i in rows]

    def loss(self, values, rows):
        pred = self.predict(values, rows)
        return sum(math.log(p / self.rows[i]["published"]) ** 2 for p, i in zip(pred, rows))


def _fit(model, params, start, rows, steps):
    """Coordinate descent over params (fractions of their ranges in [0, 1]), golden section per
    coordinate; returns ({key: text}, loss)."""
    u = dict(start)

    def values(x):
        return {p["key"]: _sensitivity._value(p, x[p["key"]]) for p in params}

    for _ in range(2):  # two sweeps over the coordinates
        for p in params:
            a, b = 0.0, 1.0
            c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
            fc = model.loss(values({**u, p["key"]: c}), rows)
            fd = model.loss(values({**u, p["key"]: d}), rows)
            for _ in range(steps):
                if fc <= fd:
                    b, d, fd = d, c, fc
                    c = b - GOLDEN * (b - a)
                    fc = model.loss(values({**u, p["key"]: c}), rows)
                else:
                    a, c, fc = c, d, fd
                    d = a + GOLDEN * (b - a)
                    fd = model.loss(values({**u, p["key"]: d}), rows)
            best = min((fc, c), (fd, d), (model.loss(values(u), rows), u[p["key"]]))
            u[p["key"]] = best[1]
    v = values(u)
    return v, model.loss(v, rows)


def _fraction(p, text):
    """Where `text` lies in p's range, on the scale _value uses."""
    _, lo = _core._quantity(p["low"])
    _, hi = _core._quantity(p["high"])
    _, x = _core._quantity(text)
    if lo > 0 and hi / lo >= 4:
        return math.log(x / lo) / math.log(hi / lo)
    return (x - lo) / (hi - lo) if hi > lo else 0.0


def calibrate(name, folder=None, jobs=None, steps=10, progress=True):
    """Fits and leave-one-out for dataset `name`; returns a dict (params, preset values, fitted
    values, rows with published, preset, fitted and leave-one-out predictions and errors)."""
    folder = folder or calibration_dir()
    path = os.path.join(folder, name + ".yaml")
    if not os.path.exists(path):
        have = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
        raise ValueError(f"no calibration dataset {name!r} (have: {', '.join(have)})")
    with open(path) as f:
        data = yaml.safe_load(f)
    if len(data.get("rows") or []) < 2:
        raise ValueError(f"{path}: needs at least two rows (leave-one-out fits on the others)")
    source = _results._source(os.path.normpath(os.path.join(folder, data["scenario"])))
    every = _core._uncertain(source, [("hardware.preset", data["preset"])])
    params = [p for p in every if p["fitted_to"] == name]
    if not params:
        raise ValueError(f"neither preset {data['preset']} nor an engine profile has a value "
                         f"with fitted_to: {name}")
    model = _Model(folder, data, jobs or os.cpu_count() or 1,
                   {p["key"]: p["override"] for p in params})
    preset_values = {p["key"]: p["value"] for p in params}
    start = {p["key"]: min(1.0, max(0.0, _fraction(p, preset_values[p["key"]]))) for p in params}
    n = len(model.rows)
    everything = list(range(n))

    def say(text):
        if progress:
            sys.stderr.write(f"\r  {text:<60}")
            sys.stderr.flush()

    say(f"{name}: fitting {len(params)} values on {n} rows")
    fitted, loss = _fit(model, params, start, everything, steps)
    preset_pred = model.predict(preset_values, everything)
    fitted_pred = model.predict(fitted, everything)
    rows = []
    for i in range(n):
        say(f"{name}: leave-one-out {i + 1}/{n}")
        rest = [j for j in everything if j != i]
        loo_values, _ = _fit(model, params, start, rest, steps)
        loo = model.predict(loo_values, [i])[0]
        pub = model.rows[i]["published"]
        rows.append({"label": model.rows[i]["label"], "published": pub,
                     "preset": preset_pred[i], "preset_error_pct": _err(preset_pred[i], pub),
                     "fitted": fitted_pred[i], "fitted_error_pct": _err(fitted_pred[i], pub),
                     "loo": loo, "loo_error_pct": _err(loo, pub), "loo_values": loo_values})
    if progress:
        sys.stderr.write("\n")
    return {"dataset": name, "preset": data["preset"], "metric": model.metric, "params": params,
            "preset_values": preset_values, "fitted_values": fitted, "fitted_loss": loss,
            "rows": rows, "runs": model.runs}


def _err(pred, pub):
    return 100.0 * (pred - pub) / pub


def markdown(c):
    rms = lambda xs: math.sqrt(sum(x * x for x in xs) / len(xs))  # noqa: E731
    lines = [f"## {c['dataset']} ({c['preset']})", "",
             "| value | preset | fitted on all rows | range |", "|---|---|---|---|"]
    for p in c["params"]:
        lines.append(f"| {p['key']} | {c['preset_values'][p['key']]} | "
                     f"{_sensitivity._human(p, c['fitted_values'][p['key']])} | "
                     f"{p['low']} .. {p['high']} |")
    lines += ["", f"| row | published {c['metric']} | preset | fitted | leave-one-out |",
              "|---|---|---|---|---|"]
    for r in c["rows"]:
        lines.append(f"| {r['label']} | {r['published']:.4g} | {r['preset']:.4g} "
                     f"({r['preset_error_pct']:+.0f} %) | {r['fitted']:.4g} "
                     f"({r['fitted_error_pct']:+.0f} %) | {r['loo']:.4g} "
                     f"({r['loo_error_pct']:+.0f} %) |")
    lines += ["", f"RMS error: preset {rms([r['preset_error_pct'] for r in c['rows']]):.0f} %, "
              f"fitted {rms([r['fitted_error_pct'] for r in c['rows']]):.0f} %, "
              f"leave-one-out {rms([r['loo_error_pct'] for r in c['rows']]):.0f} % "
              f"({c['runs']} runs)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kvsim calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="*", help="names in scenarios/calibration (default: all)")
    ap.add_argument("-o", "--out", default=os.path.join("out", "calibration"))
    ap.add_argument("--steps", type=int, default=10, help="golden-section steps per value")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    names = args.datasets or sorted(f[:-5] for f in os.listdir(calibration_dir())
                                    if f.endswith(".yaml"))
    os.makedirs(args.out, exist_ok=True)
    text = ""
    results = []
    try:
        for name in names:
            c = calibrate(name, jobs=args.jobs, steps=args.steps)
            results.append(c)
            text += markdown(c) + "\n"
    except (ValueError, RuntimeError, OSError, KeyError) as e:
        print(f"kvsim calibrate: {e}", file=sys.stderr)
        return 2
    with open(os.path.join(args.out, "calibration.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "calibration.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(text, end="")
    print(f"calibration of {', '.join(names)}: {args.out}/calibration.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
