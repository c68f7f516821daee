"""kvsim's predictions against published measurements on real hardware (never fitted to them).

``kvsim validate`` (or ``kvsim.validation.validate()``) runs every row of
scenarios/validation/published.yaml: the row's scenario with its overrides, as `kvsim run` runs
it, and compares the row's metric with the published figure. Writes validation.md (the table and
the accuracy per device type: rows, MAPE, worst row), validation.json and, unless --no-report, a
predicted-against-published plot and index.html. Exits 1 when a row's error leaves its
tolerance (``tolerance_pct``, default 25 %, the goal), so CI catches a drift.
"""
import argparse
import json
import os
import sys

import yaml

from kvsim import _core
from kvsim import results as _results

__all__ = ["validation_dir", "validate", "by_device", "main"]

UNITS = {"effective_gbps": "GB/s", "exposed_ms": "ms", "ttft_ms": "ms", "tpot_ms": "ms"}
_KIND = {"ttft_ms": "TTFT", "tpot_ms": "TPOT"}  # serving rows; the rest are transfer rows
GOAL_PCT = 25.0  # every row within this; a row that misses it states its own tolerance and why


def validation_dir():
    """scenarios/validation: $KVSIM_VALIDATION_DIR, else the source tree's."""
    return os.environ.get("KVSIM_VALIDATION_DIR") or os.path.join(
        _core._source_dir, "scenarios", "validation")


def _metric(result, metric):
    reqs = result.requests
    if metric == "effective_gbps":
        return sum(r["effective_gbps"] for r in reqs) / len(reqs)
    if metric == "exposed_ms":
        return sum(r["exposed_us"] for r in reqs) / len(reqs) / 1e3
    if metric == "ttft_ms":
        return sum(r["ttft_us"] for r in reqs) / len(reqs) / 1e3
    if metric == "tpot_ms":
        return sum(r["tpot_us"] for r in reqs) / len(reqs) / 1e3
    raise ValueError(f"metric must be one of {', '.join(UNITS)}, not {metric!r}")


def validate(folder=None, jobs=None, progress=True):
    """Runs every published row; returns a list of dicts (label, metric, published, predicted,
    error_pct, source, scenario, ok)."""
    folder = folder or validation_dir()
    with open(os.path.join(folder, "published.yaml")) as f:
        rows = yaml.safe_load(f)["rows"]
    by_scenario = {}
    for i, row in enumerate(rows):
        if row["metric"] not in UNITS:
            raise ValueError(f"published.yaml row {i}: metric must be one of "
                             f"{', '.join(UNITS)}, not {row['metric']!r}")
        by_scenario.setdefault(row["scenario"], []).append(i)
    out = [None] * len(rows)
    done = [0]
    for scenario, indices in by_scenario.items():
        source = _results._source(os.path.join(folder, scenario))
        points = [[(k, str(v)) for k, v in (rows[i].get("set") or {}).items()] for i in indices]
        cb = None
        if progress:
            def cb(_d, _t, base=done[0]):
                sys.stderr.write("\r" + _core._progress_bar(base + _d, len(rows)).replace(
                    "points", "published figures"))
                sys.stderr.flush()
        results = _results._run_list(source, points, jobs or os.cpu_count() or 1, cb)
        done[0] += len(indices)
        for i, result in zip(indices, results):
            row = rows[i]
            predicted = _metric(result, row["metric"])
            out[i] = {"label": row["label"], "scenario": scenario, "set": row.get("set") or {},
                      "metric": row["metric"], "unit": UNITS[row["metric"]],
                      "published": row["published"], "predicted": predicted,
                      "error_pct": 100.0 * (predicted - row["published"]) / row["published"],
                      "source": row["source"], "ok": result.ok,
                      "device": row.get("device", "?"),
                      "tolerance_pct": float(row.get("tolerance_pct", GOAL_PCT)),
                      "known_miss": row.get("known_miss", "")}
    if progress:
        sys.stderr.write("\n")
    return out


def by_device(rows):
    """Accuracy per device type and kind of row (transfer, TTFT), AIConfigurator-style:
    [{device, rows, mape_pct, within_goal, worst}] in the rows' order of first appearance."""
    groups = {}
    for r in rows:  # transfer and serving (TTFT) rows of a device apart: different models
        kind = _KIND.get(r["metric"], "transfer")
        groups.setdefault(f"{r['device']}, {kind}", []).append(r)
    out = []
    for device, rs in groups.items():
        worst = max(rs, key=lambda r: abs(r["error_pct"]))
        out.append({"device": device, "rows": len(rs),
                    "mape_pct": sum(abs(r["error_pct"]) for r in rs) / len(rs),
                    "within_goal": sum(abs(r["error_pct"]) <= GOAL_PCT for r in rs),
                    "worst": worst["label"], "worst_pct": worst["error_pct"]})
    return out


def drifted(rows):
    """The rows whose error leaves their tolerance."""
    return [r for r in rows if not abs(r["error_pct"]) <= r["tolerance_pct"]]


def markdown(rows):
    lines = ["| measurement | published | kvsim | error | source |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['published']:.4g} {r['unit']} | "
                     f"{r['predicted']:.4g} {r['unit']} | {r['error_pct']:+.0f} % | {r['source']} |")
    misses = [r for r in rows if r["known_miss"] and abs(r["error_pct"]) > GOAL_PCT]
    if misses:
        lines += ["", "Rows outside the goal, and why:", ""]
        lines += [f"- {r['label']} ({r['error_pct']:+.0f} %): {r['known_miss']}" for r in misses]
    lines += ["", f"| device | rows | MAPE | within {GOAL_PCT:.0f} % | worst row |",
              "|---|---|---|---|---|"]
    for d in by_device(rows):
        lines.append(f"| {d['device']} | {d['rows']} | {d['mape_pct']:.1f} % | "
                     f"{d['within_goal']} of {d['rows']} | {d['worst']} ({d['worst_pct']:+.0f} %) |")
    return "\n".join(lines) + "\n"


def load_series(rows):
    """Rows that form a series by load: labels "<setup>, concurrency N" of one metric, three or
    more to a setup. {(setup, metric): [(N, published, predicted)]}, each ascending in N."""
    series = {}
    for r in rows:
        setup, sep, n = r["label"].rpartition(", concurrency ")
        if sep and n.isdigit():
            series.setdefault((setup, r["metric"]), []).append(
                (int(n), r["published"], r["predicted"]))
    return {k: sorted(v) for k, v in series.items() if len(v) >= 3}


def plot(rows, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by_load = load_series(rows)
    fig, axs = plt.subplots(1, 4 if by_load else 3, figsize=(21 if by_load else 16, 4.6))
    kinds = (("GB/s", ("effective_gbps",)), ("ms", ("exposed_ms",)), ("ms", ("ttft_ms", "tpot_ms")))
    for ax, (unit, metrics) in zip(axs, kinds):
        mine = [r for r in rows if r["metric"] in metrics]
        if not mine:
            ax.set_visible(False)
            continue
        groups = {}
        for r in mine:
            groups.setdefault(r["scenario"], []).append(r)
        for name, rs in groups.items():
            ax.scatter([r["published"] for r in rs], [r["predicted"] for r in rs], label=name[:-5])
        values = [r["published"] for r in mine] + [r["predicted"] for r in mine]
        lo, hi = min(values) / 1.5, max(values) * 1.5
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
        ax.fill_between([lo, hi], [lo / 1.25, hi / 1.25], [lo * 1.25, hi * 1.25], color="grey",
                        alpha=0.2, label="within 25 %")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"published ({unit})")
        ax.set_ylabel(f"kvsim ({unit})")
        ax.legend(fontsize=7)
    axs[0].set_title("Bandwidth by block size (microbenchmarks)", fontsize=9)
    axs[1].set_title("KV transfer time of one request (serving engines)", fontsize=9)
    axs[2].set_title("TTFT by prompt length and TPOT (serving engines)", fontsize=9)
    if by_load:  # published points and kvsim's line, one colour per setup
        ax = axs[3]
        for (setup, metric), points in by_load.items():
            n = [p[0] for p in points]
            line = ax.plot(n, [p[2] for p in points], lw=1.2, label=f"{setup} (kvsim)")[0]
            ax.scatter(n, [p[1] for p in points], color=line.get_color(), s=14)
        ax.set_xscale("log", base=2)
        ticks = sorted({p[0] for points in by_load.values() for p in points})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(f"{'TPOT' if all(m == 'tpot_ms' for _, m in by_load) else 'value'} (ms)")
        ax.set_title("By load: published (points) and kvsim (lines)", fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("kvsim's predictions against published hardware measurements (no fitting)")
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out_dir, f"validation.{ext}"), dpi=120, bbox_inches="tight")
    plt.close(fig)


def page(rows, out_dir):
    """index.html: the plot, then every published figure against kvsim's."""
    import html
    cells = "".join(
        f"<tr><td>{html.escape(r['label'])}</td><td>{r['published']:.4g} {html.escape(r['unit'])}"
        f"</td><td>{r['predicted']:.4g} {html.escape(r['unit'])}</td>"
        f"<td>{r['error_pct']:+.0f} %</td><td>{html.escape(r['source'])}</td></tr>" for r in rows)
    devices = "".join(
        f"<tr><td>{html.escape(d['device'])}</td><td>{d['rows']}</td><td>{d['mape_pct']:.1f} %"
        f"</td><td>{d['within_goal']} of {d['rows']}</td><td>{html.escape(d['worst'])} "
        f"({d['worst_pct']:+.0f} %)</td></tr>" for d in by_device(rows))
    title = "kvsim validation against published hardware measurements"
    with open(os.path.join(out_dir, "index.html"), "w") as f:
        f.write(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
                "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;"
                "text-align:left}</style></head><body>"
                f"<h1>{title}</h1><p>No value of kvsim was fitted to these rows.</p>"
                '<p><img src="validation.svg" alt="validation" style="max-width:100%"></p>'
                "<table><tr><th>measurement</th><th>published</th><th>kvsim</th><th>error</th>"
                f"<th>source</th></tr>{cells}</table><h2>Accuracy by device type</h2>"
                f"<table><tr><th>device</th><th>rows</th><th>MAPE</th>"
                f"<th>within {GOAL_PCT:.0f} %</th><th>worst row</th></tr>{devices}</table>"
                "</body></html>")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kvsim validate", description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default=os.path.join("out", "validation"))
    ap.add_argument("--dir", default=None, help="a folder with published.yaml and its scenarios")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    ap.add_argument("--no-report", action="store_true", help="no plot or page")
    args = ap.parse_args(argv)
    try:
        rows = validate(args.dir, args.jobs)
    except (ValueError, RuntimeError, OSError, KeyError) as e:
        print(f"kvsim validate: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "validation.json"), "w") as f:
        json.dump(rows, f, indent=1)
    table = markdown(rows)
    with open(os.path.join(args.out, "validation.md"), "w") as f:
        f.write(table)
    if not args.no_report:
        plot(rows, args.out)
        page(rows, args.out)
    print(table, end="")
    print(f"{len(rows)} published figures: {args.out}/validation.md")
    bad = drifted(rows)
    for r in bad:
        print(f"kvsim validate: {r['label']}: error {r['error_pct']:+.1f} % leaves its tolerance "
              f"of {r['tolerance_pct']:.0f} % (scenarios/validation/published.yaml)",
              file=sys.stderr)
    return 0 if all(r["ok"] for r in rows) and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
