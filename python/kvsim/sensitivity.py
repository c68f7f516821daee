"""How a scenario's or a sweep's answer depends on the preset values kvsim had to infer.

``kvsim sensitivity SCENARIO [--set key=v1,v2 ...]`` (or ``kvsim.sensitivity.analyse``) takes the
uncertain parameters of the scenario's preset (its ``uncertain:`` section: fitted or inferred
values, each with a plausible low and high), and reruns the scenario, at every point of the
sweep, with each parameter at its low and at its high (one at a time) and with a small Latin
hypercube sample of all of them at once. It reports:

- a tornado plot of the headline metric per sweep point (which parameter moves it, how far);
- for a sweep, whether its conclusion along the first axis holds over the whole ranges, in words
  ("100Gb/s -> 400Gb/s changes mean exposed time by -63 % to -41 %; the curve is flat only if
  dma.descriptor_cost > 12.1us"), the threshold found by bisection between low and high.

Every point runs as `kvsim run` runs it (a forked child, fresh kernel), so results are those of
the command, bit for bit; the sample is drawn from a seeded generator.
"""
import argparse
import csv
import html
import json
import math
import os
import random
import sys

from kvsim import _core
from kvsim import results as _results

__all__ = ["Sensitivity", "analyse", "main"]

METRICS = {
    "mean_exposed_us": "mean exposed transfer time",
    "mean_ttft_us": "mean time to KV ready",
    "effective_gbps": "effective KV bandwidth",
    "exposed_share_pct": "exposed share of time to KV ready",
}


def _value(param, u):
    """The parameter's value at fraction u of its range, in the key's own unit (text)."""
    kind, lo = _core._quantity(param["low"])
    _, hi = _core._quantity(param["high"])
    if lo > 0 and hi / lo >= 4:  # a wide range: spread the sample over orders of magnitude
        x = lo * (hi / lo) ** u
    else:
        x = lo + (hi - lo) * u
    if param.get("integer"):
        return str(int(round(x)))
    if kind == "number":
        return f"{x:.6g}"
    if kind == "time":
        return f"{round(x)}ps"
    if kind == "bandwidth":
        return f"{x:.9g}B/s"
    return str(int(round(x)))


def _human(param, text):
    """A value for people: the key's unit as written in its range where it is one."""
    kind, x = _core._quantity(text)
    if kind == "time":
        for unit, ps in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
            if x >= ps:
                return f"{x / ps:.3g}{unit}"
        return f"{x:.0f}ps"
    if kind == "bandwidth":
        return f"{x / 1e9:.3g}GB/s"
    if kind == "bytes":
        return f"{x / 2**30:.3g}GiB"
    return text


def _latin_hypercube(n, dims, rng):
    """n points in [0, 1)^dims, one per stratum in every dimension."""
    columns = []
    for _ in range(dims):
        strata = [(i + rng.random()) / n for i in range(n)]
        rng.shuffle(strata)
        columns.append(strata)
    return [[columns[d][i] for d in range(dims)] for i in range(n)]


class Sensitivity:
    """The runs of an analysis and what they say. ``rows``: one dict per run (sweep values,
    design, parameter values, metrics); ``conclusions``: sentences; ``params``: the parameters
    varied; ``skipped``: those the scenario or the sweep sets itself."""

    def __init__(self, scenario, axes, params, skipped, metric, rows, conclusions, thresholds):
        self.scenario = scenario
        self.axes = axes
        self.params = params
        self.skipped = skipped
        self.metric = metric
        self.rows = rows
        self.conclusions = conclusions
        self.thresholds = thresholds

    def tornado(self, grid_index=0):
        """[(key, metric at low, metric at high)] at one sweep point, widest swing first, and the
        baseline value."""
        mine = [r for r in self.rows if r["grid"] == grid_index]
        base = next(r[self.metric] for r in mine if r["design"] == "baseline")
        bars = []
        for p in self.params:
            lo = next(r[self.metric] for r in mine if r["design"] == f"low:{p['key']}")
            hi = next(r[self.metric] for r in mine if r["design"] == f"high:{p['key']}")
            bars.append((p["key"], lo, hi))
        bars.sort(key=lambda b: -abs(b[2] - b[1]))
        return bars, base

    def write(self, out_dir, report=True):
        """sensitivity.json, sensitivity.csv, sensitivity.md and, with report, the plots and an
        index.html."""
        os.makedirs(out_dir, exist_ok=True)
        data = {"scenario": self.scenario, "axes": self.axes, "metric": self.metric,
                "params": self.params, "skipped": self.skipped, "rows": self.rows,
                "conclusions": self.conclusions, "thresholds": self.thresholds}
        with open(os.path.join(out_dir, "sensitivity.json"), "w") as f:
            json.dump(data, f, indent=1)
        keys = [p["key"] for p in self.params]
        columns = ["grid"] + [k for k, _ in self.axes] + ["design"] + keys + list(METRICS) + ["ok"]
        with open(os.path.join(out_dir, "sensitivity.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            for r in self.rows:
                w.writerow({**r, **r["values"], **r["sweep"]})
        with open(os.path.join(out_dir, "sensitivity.md"), "w") as f:
            f.write(self.markdown())
        if report:
            render(out_dir)

    def markdown(self):
        lines = [f"# Sensitivity of {self.scenario}", ""]
        lines += [f"- {c}" for c in self.conclusions] + [""]
        lines += ["| parameter | low | high | source |", "|---|---|---|---|"]
        for p in self.params:
            lines.append(f"| {p['key']} | {p['low']} | {p['high']} | {p['source']} |")
        if self.skipped:
            lines += ["", "Set by the scenario or the sweep, not varied: " + ", ".join(self.skipped)]
        return "\n".join(lines) + "\n"


def _grid_label(overrides):
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in overrides) or "the scenario"


def analyse(scenario, set=None, *, samples=8, seed=1, metric="mean_exposed_us", flat_pct=10.0,
            bisect_steps=5, jobs=None, params=None, progress=True):
    """Runs the analysis and returns a Sensitivity. scenario and set as for kvsim.sweep;
    samples: size of the all-at-once Latin hypercube sample; params: only these keys (default:
    every uncertain parameter the scenario does not set itself); flat_pct: a sweep's curve is
    flat when its headline metric changes by less than this along the first axis."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be an int >= 0, not {samples!r}")
    source = _results._source(scenario)
    axes = _results._sweep_axes(set) if set else []
    grid = _core._cross_product(axes) if axes else [[]]
    swept = {k for k, _ in axes}
    if any(k == "hardware.preset" and len(v) > 1 for k, v in axes):
        raise ValueError("set: hardware.preset cannot be swept here (each preset has its own "
                         "uncertain parameters): analyse one preset at a time")
    every = _core._uncertain(source, grid[0])
    chosen, skipped = [], []
    for p in every:
        if p["pinned"] or p["override"] in swept:
            skipped.append(p["key"])  # the scenario or the sweep sets it
        elif params is None or p["key"] in params:
            chosen.append(p)
    if params is not None:
        unknown = {*params} - {p["key"] for p in every}
        if unknown:
            raise ValueError(f"params: {sorted(unknown)} are not uncertain parameters of preset "
                             f"{every[0]['preset'] if every else '?'}")
    if not chosen:
        raise ValueError(f"{_results._origin(source)}: its preset has no uncertain parameter "
                         "that the scenario leaves free")
    rng = random.Random(seed)
    designs = [("baseline", {})]
    for p in chosen:
        designs.append((f"low:{p['key']}", {p["key"]: _value(p, 0.0)}))
        designs.append((f"high:{p['key']}", {p["key"]: _value(p, 1.0)}))
    for i, u in enumerate(_latin_hypercube(samples, len(chosen), rng)):
        designs.append((f"sample:{i}", {p["key"]: _value(p, x) for p, x in zip(chosen, u)}))
    key_of = {p["key"]: p["override"] for p in chosen}
    points = [list(g) + [(key_of[k], v) for k, v in d.items()] for g in grid for _, d in designs]
    jobs = jobs or os.cpu_count() or 1
    bar = _progress(progress, "runs")
    results = _results._run_list(source, points, jobs, bar)
    rows = []
    for gi, g in enumerate(grid):
        for di, (label, d) in enumerate(designs):
            r = results[gi * len(designs) + di]
            row = {"grid": gi, "sweep": dict(g), "design": label, "values": d, "ok": r.ok}
            row.update({m: r.figures[m] for m in METRICS})
            rows.append(row)
    conclusions, thresholds = _conclude(source, axes, grid, chosen, designs, rows, metric, flat_pct,
                                        bisect_steps, jobs)
    return Sensitivity(_results._origin(source), [[k, list(v)] for k, v in axes], chosen, skipped,
                       metric, rows, conclusions, thresholds)


def _progress(progress, what):
    if not progress:
        return None
    if callable(progress):
        return progress

    def bar(done, total):
        sys.stderr.write("\r" + _core._progress_bar(done, total).replace("points", what))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()
    return bar


def _change(first, last):
    return 100.0 * (last - first) / first if first else (0.0 if last == first else math.inf)


def _conclude(source, axes, grid, chosen, designs, rows, metric, flat_pct, steps, jobs):
    label = METRICS[metric]
    out, thresholds = [], []
    by = {(r["grid"], r["design"]): r for r in rows}
    if not axes or len(axes[0][1]) < 2:
        base = by[(0, "baseline")][metric]
        values = [r[metric] for r in rows if r["grid"] == 0]
        bars = sorted(((abs(by[(0, f"high:{p['key']}")][metric] - by[(0, f"low:{p['key']}")][metric]),
                        p["key"]) for p in chosen), reverse=True)
        if bars[0][0] == 0:
            moved = "no parameter moves it"
        else:
            moved = f"the widest swing comes from {bars[0][1]}" + (
                f", then {bars[1][1]}" if len(bars) > 1 and bars[1][0] > 0 else "")
        out.append(f"{label}: {min(values):.4g} to {max(values):.4g} over the plausible ranges "
                   f"(baseline {base:.4g}); {moved}.")
        return out, thresholds
    first_key, first_values = axes[0][0], axes[0][1]
    inner = len(grid) // len(first_values)  # points per value of the first axis
    for j in range(inner):
        g0, g1 = j, (len(first_values) - 1) * inner + j  # first and last value of the first axis
        rest = [kv for kv in grid[g0] if kv[0] != first_key]
        where = f"At {_grid_label(rest)}: " if rest else ""
        change = {d: _change(by[(g0, d)][metric], by[(g1, d)][metric]) for d, _ in designs}
        base = change["baseline"]
        lo, hi = min(change.values()), max(change.values())
        sentence = (f"{where}{first_key.split('.')[-1]} {first_values[0]} -> {first_values[-1]} "
                    f"changes the {label} by {_pct(lo)} to {_pct(hi)} over the plausible ranges "
                    f"(baseline {_pct(base)})")
        flat = {d: abs(c) < flat_pct for d, c in change.items()}
        if all(flat.values()):
            sentence += f"; the curve is flat (under {flat_pct:g} %) everywhere in them."
        elif not any(flat.values()):
            sentence += f"; it is flat (under {flat_pct:g} %) nowhere in them."
        else:
            flips = [p for p in chosen if flat[f"low:{p['key']}"] != flat[f"high:{p['key']}"]]
            parts = []
            for p in flips:
                t = _bisect(source, grid[g0], grid[g1], p, metric, flat_pct,
                            flat[f"high:{p['key']}"], steps, jobs)
                side = ">" if flat[f"high:{p['key']}"] else "<"
                thresholds.append({"grid": [g0, g1], "key": p["key"], "flat_if": side,
                                   "value": t})
                parts.append(f"{p['key']} {side} {_human(p, t)}")
            samples = [d for d, _ in designs if d.startswith("sample:")]
            flat_samples = sum(flat[d] for d in samples)
            if parts:
                sentence += "; the curve is flat only if " + " and ".join(parts)
            else:
                sentence += "; no single parameter decides whether the curve is flat"
            sentence += (f" (flat in {flat_samples} of {len(samples)} all-at-once samples)."
                         if samples else ".")
        out.append(sentence)
    if len(axes) >= 2 and len(axes[1][1]) >= 2:
        # The second axis as a ratio (its last value over its first), at the first axis's first
        # value: "16- vs 128-token blocks" questions.
        key, values = axes[1]
        stride = len(grid) // len(axes[0][1]) // len(values)  # points per value of axis 2
        g0, g1 = 0, (len(values) - 1) * stride
        if by[(g1, "baseline")][metric] < by[(g0, "baseline")][metric]:
            g0, g1, values = g1, g0, values[::-1]  # say "A costs 80x B", not "B costs 0.01x A"
        ratio = {d: by[(g1, d)][metric] / by[(g0, d)][metric] if by[(g0, d)][metric] else math.inf
                 for d, _ in designs}
        where = _grid_label([kv for kv in grid[0] if kv[0] != key])
        bars = sorted(((abs(math.log(max(ratio[f"high:{p['key']}"], 1e-300))
                            - math.log(max(ratio[f"low:{p['key']}"], 1e-300))), p["key"])
                       for p in chosen), reverse=True)
        out.append(f"At {where}: {key.split('.')[-1]} {values[-1]} over {values[0]} gives "
                   f"{_ratio(min(ratio.values()))} to {_ratio(max(ratio.values()))} the {label} "
                   f"over the plausible ranges (baseline {_ratio(ratio['baseline'])}); "
                   + (f"{bars[0][1]} moves it most." if bars[0][0] > 0 else
                      "no parameter moves it."))
    return out, thresholds


def _pct(x):
    return f"{x:+.1f} %" if abs(x) < 9.95 else f"{x:+.0f} %"


def _ratio(x):
    return f"{x:.3g}x"


def _bisect(source, g0, g1, p, metric, flat_pct, flat_at_high, steps, jobs):
    """The value of p where the curve between grid points g0 and g1 turns flat (monotone in p
    assumed), to `steps` halvings of its range."""
    a, b = 0.0, 1.0  # fractions of the range: not flat at a side, flat at the other
    for _ in range(steps):
        mid = (a + b) / 2
        v = _value(p, mid)
        pts = [list(g0) + [(p["override"], v)], list(g1) + [(p["override"], v)]]
        r0, r1 = _results._run_list(source, pts, min(jobs, 2), None)
        is_flat = abs(_change(r0.figures[metric], r1.figures[metric])) < flat_pct
        if is_flat == flat_at_high:
            b = mid
        else:
            a = mid
    return _value(p, (a + b) / 2)


def render(out_dir):
    """tornado.png/svg, band.png/svg and index.html of a sensitivity folder."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    with open(os.path.join(out_dir, "sensitivity.json")) as f:
        data = json.load(f)
    s = Sensitivity(data["scenario"], data["axes"], data["params"], data["skipped"],
                    data["metric"], data["rows"], data["conclusions"], data["thresholds"])
    grids = sorted({r["grid"] for r in s.rows})
    shown = grids[:12]  # a tornado per sweep point, up to twelve
    cols = min(3, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axs = plt.subplots(rows, cols, figsize=(5.6 * cols, (0.32 * min(12, len(s.params)) + 1.4) * rows),
                            squeeze=False, sharey=False)
    fig.subplots_adjust(wspace=0.95, hspace=0.45)
    for ax in axs.flat[len(shown):]:
        ax.set_visible(False)
    for ax, gi in zip(axs.flat, shown):
        bars, base = s.tornado(gi)
        top = bars[:12][::-1]
        for y, (key, lo, hi) in enumerate(top):
            ax.barh(y, lo - base, left=base, color="#4878a8", height=0.6)
            ax.barh(y, hi - base, left=base, color="#d0823a", height=0.6)
        ax.axvline(base, color="black", lw=0.8)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
        ax.set_yticks(range(len(top)), [k for k, _, _ in top], fontsize=8)
        sweep = next(r["sweep"] for r in s.rows if r["grid"] == gi)
        ax.set_title(_grid_label(list(sweep.items())), fontsize=9)
        ax.set_xlabel(f"{METRICS[s.metric]} ({s.metric.rsplit('_', 1)[-1]})")
    axs[0][0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color="#4878a8"),
                              plt.Rectangle((0, 0), 1, 1, color="#d0823a")],
                     labels=["parameter at low", "parameter at high"], fontsize=8, loc="lower right")
    fig.suptitle(f"Which inferred parameter moves the answer: {os.path.basename(s.scenario)}")
    _save(fig, out_dir, "tornado")
    images = ["tornado"]
    if s.axes and len(s.axes[0][1]) >= 2:
        key, values = s.axes[0]
        inner = len(grids) // len(values)
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for j in range(inner):
            idx = [v * inner + j for v in range(len(values))]
            per = {}
            for r in s.rows:
                if r["grid"] in idx:
                    per.setdefault(r["design"], {})[r["grid"]] = r[s.metric]
            ys = {d: [per[d][g] for g in idx] for d in per}
            lo = [min(ys[d][i] for d in ys) for i in range(len(idx))]
            hi = [max(ys[d][i] for d in ys) for i in range(len(idx))]
            x = range(len(values))
            rest = [kv for kv in next(r["sweep"] for r in s.rows if r["grid"] == j).items()
                    if kv[0] != key]
            line, = ax.plot(x, ys["baseline"], marker="o", label=_grid_label(rest) + " (preset)")
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.18)
            for d in ys:
                if d.startswith("sample:"):
                    ax.plot(x, ys[d], color=line.get_color(), lw=0.5, alpha=0.5)
        ax.set_xticks(range(len(values)), values)
        ax.set_xlabel(key)
        ax.set_ylabel(f"{METRICS[s.metric]} ({s.metric.rsplit('_', 1)[-1]})")
        ax.set_yscale("log")
        ax.set_title("Shaded: every run over the plausible ranges; thin: all-at-once samples",
                     fontsize=9)
        ax.legend(fontsize=8)
        _save(fig, out_dir, "band")
        images.insert(0, "band")
    panel = panel_html(s, images)
    with open(os.path.join(out_dir, "panel.html"), "w") as f:
        f.write(panel)  # a sweep report of the parent folder embeds it
    with open(os.path.join(out_dir, "index.html"), "w") as f:
        f.write("<!doctype html><html><head><meta charset='utf-8'><title>kvsim sensitivity</title>"
                "<style>body{font-family:sans-serif;margin:2em}</style></head><body>"
                f"<h1>{html.escape(os.path.basename(s.scenario))}</h1>{panel}</body></html>")


def _save(fig, folder, name):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(folder, f"{name}.{ext}"), dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)


def panel_html(s, images):
    """The sensitivity panel: conclusions, plots (relative to the panel's folder) and the
    parameter table."""
    parts = ["<h2>How sure is this? Sensitivity to inferred parameters</h2>", "<ul>"]
    parts += [f"<li>{html.escape(c)}</li>" for c in s.conclusions]
    parts.append("</ul>")
    for name in images:
        parts.append(f'<p><img src="{name}.svg" alt="{name}" style="max-width:100%"></p>')
    parts.append("<table border=1 cellspacing=0 cellpadding=3><tr><th>parameter</th><th>low</th>"
                 "<th>high</th><th>source</th></tr>")
    for p in s.params:
        parts.append(f"<tr><td>{html.escape(p['key'])}</td><td>{html.escape(p['low'])}</td>"
                     f"<td>{html.escape(p['high'])}</td><td>{html.escape(p['source'])}</td></tr>")
    parts.append("</table>")
    if s.skipped:
        parts.append("<p>Set by the scenario or the sweep, not varied: "
                     + html.escape(", ".join(s.skipped)) + "</p>")
    return "\n".join(parts) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="kvsim sensitivity",
        description="Vary the scenario preset's uncertain parameters over their plausible ranges "
                    "and report which ones move the answer, and whether a sweep's conclusion holds.")
    ap.add_argument("scenario", help="scenario file or library name")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                    help="sweep axes, as for kvsim sweep (the first one is the conclusion's)")
    ap.add_argument("-o", "--out", default=None, help="output folder (default out/sensitivity)")
    ap.add_argument("--samples", type=int, default=8, help="all-at-once Latin hypercube samples")
    ap.add_argument("--seed", type=int, default=1, help="seed of that sample")
    ap.add_argument("--metric", default="mean_exposed_us", choices=sorted(METRICS))
    ap.add_argument("--flat", type=float, default=10.0, metavar="PCT",
                    help="a curve is flat if the metric changes by less than PCT %% along it")
    ap.add_argument("--params", default=None, metavar="K1,K2",
                    help="only these uncertain parameters")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    ap.add_argument("--no-report", action="store_true", help="no plots or index.html")
    args = ap.parse_args(argv)
    try:
        s = analyse(args.scenario, args.set or None, samples=args.samples, seed=args.seed,
                    metric=args.metric, flat_pct=args.flat, jobs=args.jobs,
                    params=args.params.split(",") if args.params else None, progress=True)
    except (ValueError, RuntimeError) as e:
        print(f"kvsim sensitivity: {e}", file=sys.stderr)
        return 2
    out = args.out or os.path.join("out", "sensitivity")
    s.write(out, report=not args.no_report)
    for c in s.conclusions:
        print(c)
    print(f"sensitivity of {len(s.params)} parameters in {len(s.rows)} runs: {out}/sensitivity.md"
          + ("" if args.no_report else f", report {out}/index.html"))
    return 0 if all(r["ok"] for r in s.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
