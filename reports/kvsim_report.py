"""Renders kvsim results as plots and an index.html (matplotlib, Agg backend).

Called by `kvsim report DIR` through pybind11's embedded interpreter, or directly:
    /usr/bin/python3 reports/kvsim_report.py DIR
A run folder (result.json, compute.csv, trace.json) gets a per-layer timeline and link
utilisation over time; a sweep folder (sweep.csv) gets sweep curves.
"""
import csv
import html
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "kvsim"  # stable element ids across runs
import matplotlib.pyplot as plt  # noqa: E402

FORMATS = ("png", "svg")


def _save(fig, folder, name):
    paths = []
    for ext in FORMATS:
        path = os.path.join(folder, f"{name}.{ext}")
        # No date or version stamp, so the same results draw the same bytes.
        meta = {"Date": None, "Creator": None} if ext == "svg" else {"Software": None}
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata=meta)
        paths.append(path)
    plt.close(fig)
    return paths


def _link_spans(trace_path):
    """Data spans per link from the Chrome trace: {link: [(start_us, end_us, bytes)]}."""
    if not os.path.exists(trace_path):
        return {}
    with open(trace_path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    pid_names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    tid_names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = {}
    for e in events:
        if e.get("ph") != "X" or pid_names.get(e["pid"]) != "links":
            continue
        spans.setdefault(tid_names[e["tid"]], []).append(
            (e["ts"], e["ts"] + e["dur"], float(e.get("args", {}).get("bytes", 0))))
    return spans


LATENCIES = (("ttft_us", "TTFT"), ("kv_ready_us", "KV ready"), ("queueing_us", "queueing"),
             ("exposed_us", "exposed KV transfer"))


def _cdf(ax, values, label):
    xs = sorted(v / 1e3 for v in values)
    n = len(xs)
    if n:
        ax.step(xs, [(i + 1) / n for i in range(n)], where="post", label=label, lw=1.2)


def render_serving(folder, result):
    """Latency CDFs, queues and link utilisation over time of one serving run."""
    reqs = [r for r in result["requests"] if r["ok"]]
    images = []
    fig, axes = plt.subplots(1, len(LATENCIES), figsize=(14, 3.4))
    for ax, (key, name) in zip(axes, LATENCIES):
        _cdf(ax, [max(r[key], 1e-3) for r in reqs], name)
        ax.set_xscale("log")
        ax.set_xlabel(f"{name} (ms)")
        ax.grid(alpha=0.3)
        p99 = result["serving"][key]["p99"] / 1e3
        ax.axvline(p99, color="k", lw=0.8, ls=":")
        ax.set_title(f"{name}: p99 {p99:.1f} ms", fontsize=9)
    axes[0].set_ylabel("share of requests")
    fig.suptitle("Latency CDFs (dotted: p99)")
    _save(fig, folder, "latency_cdf")
    images.append("latency_cdf")

    series = result.get("series", {})
    times = [t / 1e6 for t in series.get("time_us", [])]
    if times:
        fig, (q, u) = plt.subplots(2, 1, figsize=(12, 6.5), sharex=True)
        for name, values in series.items():
            if name.endswith(" queue") or name.endswith(" waiting") or name.endswith(" running"):
                q.plot(times, values, lw=1, label=name,
                       ls="-" if not name.endswith(" running") else "--")
        q.set_ylabel("requests")
        q.set_title("Prefill queues, decode batches (dashed) and requests waiting for decode")
        q.legend(fontsize=7, ncol=4)
        links = {k: v for k, v in series.items() if k.endswith(" util")}
        busiest = sorted(links, key=lambda k: -sum(links[k]))[:6]
        for name in busiest:
            u.plot(times, [100 * x for x in links[name]], lw=1, label=name[:-5])
        if links:
            mean = [100 * sum(v[i] for v in links.values()) / len(links) for i in range(len(times))]
            u.plot(times, mean, color="k", lw=1.5, label=f"mean of {len(links)} links")
        u.set_ylabel("busier direction (%)")
        u.set_xlabel("simulated time (s)")
        u.set_title("Scale-out link utilisation per sample interval")
        u.legend(fontsize=7, ncol=4)
        for a in (q, u):
            a.grid(alpha=0.3)
        _save(fig, folder, "serving_timeline")
        images.append("serving_timeline")
    return images


def _serving_numbers(result):
    sv = result["serving"]
    ms = lambda p: f"p50 {p['p50'] / 1e3:.1f} ms, p90 {p['p90'] / 1e3:.1f} ms, p99 {p['p99'] / 1e3:.1f} ms"
    return [
        ("scenario", result["scenario"]["origin"]),
        ("cluster", f"{sv['prefill_instances']}P{sv['decode_instances']}D, "
                    f"{result['scenario']['model']} TP{result['scenario']['tensor_parallel']}, "
                    f"{result['scenario']['preset']} " +
         " ".join(f"{k}={v}" for k, v in result["scenario"]["hardware_overrides"].items())),
        ("requests", f"{sv['requests']} ({sv['succeeded']} succeeded)"),
        ("TTFT", ms(sv["ttft_us"])),
        ("KV ready (arrival to KV on decode)", ms(sv["kv_ready_us"])),
        ("exposed KV transfer", ms(sv["exposed_us"])),
        ("queueing", ms(sv["queueing_us"])),
        ("TPOT", ms(sv["tpot_us"])),
        ("SLOs", f"TTFT <= {sv['slo_ttft_us'] / 1e6:g} s, TPOT <= {sv['slo_tpot_us'] / 1e3:g} ms: "
                 f"{100 * sv['slo_attainment']:.1f} % met, goodput {sv['goodput_rps']:.3f} req/s"),
        ("bytes verified", f"{sv['verified']} of {sv['checked']} checked requests equal "
                           f"(serving.verify {sv['verify_fraction']:g}); the rest timed only"),
        ("diagnostics", str(len(result["diagnostics"]))),
    ]


SCHEMA = 1  # the result files this report reads (sim/result_codec.h kResultSchema)


def render_run(folder):
    """Timeline and link utilisation of one run; returns the image base names."""
    path = os.path.join(folder, "result.json")
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    if result.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {result.get('schema')} (written by another kvsim); "
                         f"this report reads schema {SCHEMA}")
    if "serving" in result:
        images = render_serving(folder, result)
        _index(folder, "kvsim serving run: " + result["scenario"]["question"], _serving_numbers(result),
               images)
        return images
    compute = []
    with open(os.path.join(folder, "compute.csv"), encoding="utf-8") as f:
        for row in csv.DictReader(f):
            compute.append((int(row["request"]), int(row["layer"]), float(row["start_us"]), float(row["end_us"])))
    spans = _link_spans(os.path.join(folder, "trace.json"))
    links = sorted(spans, key=lambda k: -sum(b for _, _, b in spans[k]))[:8]
    images = []

    # Per-layer timeline of the first request: prefill compute against transfers per link.
    req = result["requests"][0] if result["requests"] else None
    if req:
        t0, t1 = req["prefill_start_us"], req["transfer_end_us"]
        fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * (len(links) + 1)))
        rows = ["prefill compute"] + links
        for (r, layer, s, e) in compute:
            if r == 0:
                ax.broken_barh([((s - t0) / 1e3, (e - s) / 1e3)], (0 - 0.4, 0.8),
                               facecolors="#4C72B0" if layer % 2 == 0 else "#7FA3D6")
        visible = (t1 - t0) / 1e3 / 400  # keep microsecond transfers visible at millisecond scale
        for i, link in enumerate(links, start=1):
            bars = [((s - t0) / 1e3, max((e - s) / 1e3, visible)) for s, e, _ in spans[link] if t0 <= s <= t1]
            ax.broken_barh(bars, (i - 0.4, 0.8), facecolors="#DD8452")
        ax.axvline((req["prefill_end_us"] - t0) / 1e3, color="k", lw=0.8, ls="--")
        ax.set_yticks(range(len(rows)), rows)
        ax.invert_yaxis()
        ax.set_xlabel("time since prefill start (ms)")
        ax.set_title(f"Request 0: prefill layers (blue) and KV data on each link (orange); "
                     f"exposed {req['exposed_us']:.1f} us after the dashed line")
        _save(fig, folder, "timeline")
        images.append("timeline")

    # Link utilisation over time, binned.
    if links:
        end = max(e for link in links for _, e, _ in spans[link])
        bins = 200
        width = end / bins
        fig, ax = plt.subplots(figsize=(11, 3.5))
        for link in links:
            load = [0.0] * bins
            for s, e, b in spans[link]:
                rate = b / max(e - s, 1e-9)  # bytes per us
                first, last = int(s // width), min(int(e // width), bins - 1)
                for k in range(first, last + 1):
                    overlap = min(e, (k + 1) * width) - max(s, k * width)
                    if overlap > 0:
                        load[k] += rate * overlap
            ax.plot([(k + 0.5) * width / 1e3 for k in range(bins)], [x / width / 1e3 for x in load],
                    label=link, lw=1)
        ax.axhline(result["effective_rate_gbps"], color="k", lw=0.8, ls=":", label="effective link rate")
        ax.set_xlabel("simulated time (ms)")
        ax.set_ylabel("GB/s")
        ax.set_title("Link throughput over time")
        ax.legend(fontsize=7, ncol=2)
        _save(fig, folder, "link_utilization")
        images.append("link_utilization")
    _index(folder, "kvsim run: " + result["scenario"]["question"], _run_numbers(result), images)
    return images


def _run_numbers(result):
    reqs = result["requests"]
    n = max(len(reqs), 1)
    return [
        ("scenario", result["scenario"]["origin"]),
        ("hardware", result["scenario"]["preset"] + " " +
         " ".join(f"{k}={v}" for k, v in result["scenario"]["hardware_overrides"].items())),
        ("model", f"{result['scenario']['model']} TP{result['scenario']['tensor_parallel']}"),
        ("requests", str(len(reqs))),
        ("mean exposed transfer", f"{sum(r['exposed_us'] for r in reqs) / n:.1f} us"),
        ("mean time to KV ready", f"{sum(r['ttft_us'] for r in reqs) / n / 1e3:.2f} ms"),
        ("mean effective KV bandwidth", f"{sum(r['effective_gbps'] for r in reqs) / n:.2f} GB/s"),
        ("bytes verified", "all" if all(r["verified"] for r in reqs) else "NOT ALL"),
        ("diagnostics", str(len(result["diagnostics"]))),
    ]


FIGURES = {"point", "requests", "mean_exposed_us", "mean_ttft_us", "exposed_share_pct",
           "kv_bytes_per_request", "effective_gbps", "line_rate_gbps", "ttft_p50_us", "ttft_p99_us",
           "kv_ready_p99_us", "exposed_p99_us", "slo_attainment", "goodput_rps", "status"}


def _number(text):
    """The leading number of a swept value ("200Gb/s" -> 200.0), or None."""
    m = re.match(r"\s*([0-9.]+)", text)
    return float(m.group(1)) if m else None


def render_sweep(folder):
    """Sweep curves: exposed time and effective bandwidth against the first swept key."""
    with open(os.path.join(folder, "sweep.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in rows[0] if k not in FIGURES]
    x_key = keys[0]
    series = {}
    for row in rows:
        label = ", ".join(f"{k}={row[k]}" for k in keys[1:]) or "all"
        series.setdefault(label, []).append(row)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    for label, pts in series.items():
        numeric = all(_number(p[x_key]) is not None for p in pts)
        xs = [_number(p[x_key]) if numeric else p[x_key] for p in pts]
        a1.plot(xs, [float(p["mean_exposed_us"]) for p in pts], marker="o", label=label)
        a2.plot(xs, [float(p["effective_gbps"]) for p in pts], marker="o", label=label)
    a1.set_xlabel(x_key)
    a1.set_ylabel("mean exposed transfer (us)")
    a1.set_yscale("log")
    a2.set_xlabel(x_key)
    a2.set_ylabel("effective KV bandwidth (GB/s)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("Sweep: " + folder)
    _save(fig, folder, "sweep")
    images = ["sweep"]
    if any(r.get("slo_attainment") for r in rows):
        images += _serving_sweep(folder, rows, keys, x_key, series)
    numbers = [(", ".join(f"{k}={r[k]}" for k in keys),
                f"exposed {float(r['mean_exposed_us']):.1f} us, {float(r['effective_gbps']):.2f} GB/s, "
                f"{r['status']}") for r in rows]
    _index(folder, "kvsim sweep", numbers, images, _serving_panel(folder) + _sensitivity_panel(folder))
    return images


def _serving_sweep(folder, rows, keys, x_key, series):
    """Percentiles against the first swept key, and each point's TTFT CDF."""
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4))
    for label, pts in series.items():
        numeric = all(_number(p[x_key]) is not None for p in pts)
        xs = [_number(p[x_key]) if numeric else p[x_key] for p in pts]
        a1.plot(xs, [float(p["ttft_p99_us"]) / 1e3 for p in pts], marker="o", label=f"TTFT p99, {label}")
        a1.plot(xs, [float(p["ttft_p50_us"]) / 1e3 for p in pts], marker=".", ls="--",
                label=f"TTFT p50, {label}")
        a1.plot(xs, [float(p["kv_ready_p99_us"]) / 1e3 for p in pts], marker="s", ls=":",
                label=f"KV ready p99, {label}")
        a2.plot(xs, [float(p["exposed_p99_us"]) / 1e3 for p in pts], marker="o", label=label)
        a3.plot(xs, [100 * float(p["slo_attainment"]) for p in pts], marker="o", label=label)
    a1.set_ylabel("ms")
    a1.set_yscale("log")
    a2.set_ylabel("exposed KV transfer p99 (ms)")
    a3.set_ylabel("requests meeting both SLOs (%)")
    for a in (a1, a2, a3):
        a.set_xlabel(x_key)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("Serving percentiles and SLO attainment across the sweep")
    _save(fig, folder, "serving_sweep")
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in rows:
        path = os.path.join(folder, f"point-{r['point']}", "result.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            reqs = [q for q in json.load(f)["requests"] if q["ok"]]
        _cdf(ax, [q["ttft_us"] for q in reqs], ", ".join(f"{k}={r[k]}" for k in keys))
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms)")
    ax.set_ylabel("share of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("TTFT CDF per sweep point")
    _save(fig, folder, "serving_cdfs")
    return ["serving_sweep", "serving_cdfs"]


def _serving_panel(folder):
    """The serving sweep `kvsim sweep ... -o FOLDER/serving` wrote: its figures per point and plots."""
    path = os.path.join(folder, "serving", "sweep.csv")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in rows[0] if k not in FIGURES and k != "workload.trace.window.to"]
    question = ""
    result = os.path.join(folder, "serving", "point-0", "result.json")
    if os.path.exists(result):
        with open(result, encoding="utf-8") as f:
            question = json.load(f)["scenario"]["question"]
    lines = "".join(
        f"<tr><th>{html.escape(', '.join(f'{k}={r[k]}' for k in keys))}</th>"
        f"<td>TTFT p50 {float(r['ttft_p50_us']) / 1e3:.1f} ms, p99 {float(r['ttft_p99_us']) / 1e3:.1f} ms; "
        f"KV ready p99 {float(r['kv_ready_p99_us']) / 1e3:.1f} ms; exposed KV p99 "
        f"{float(r['exposed_p99_us']) / 1e3:.2f} ms; SLOs met {100 * float(r['slo_attainment'] or 0):.1f} %"
        f"</td></tr>" for r in rows)
    imgs = "".join(f'<p><img src="serving/{n}.svg" alt="{n}" style="max-width:100%"></p>'
                   for n in ("serving_sweep", "serving_cdfs")
                   if os.path.exists(os.path.join(folder, "serving", f"{n}.svg")))
    return (f"<h2>Serving at cluster scale</h2><p>{html.escape(question)} "
            "(a slice of the trace; serving/index.html has every point)</p>"
            f"<table>{lines}</table>{imgs}")


def _sensitivity_panel(folder):
    """The panel `kvsim sensitivity -o FOLDER/sensitivity` wrote, its images re-rooted here."""
    path = os.path.join(folder, "sensitivity", "panel.html")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return re.sub(r'src="(?![a-z]+:|/)', 'src="sensitivity/', f.read())


def _index(folder, title, numbers, images, extra=""):
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in numbers)
    imgs = "".join(f'<p><img src="{name}.svg" alt="{name}" style="max-width:100%"></p>' for name in images)
    with open(os.path.join(folder, "index.html"), "w", encoding="utf-8") as f:
        f.write(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}</style>"
                f"</head><body><h1>{html.escape(title)}</h1><table>{rows}</table>{imgs}{extra}</body></html>")


def render_campaign(folder):
    """A fault campaign (kvsim run --faults): SLO attainment (or requests ok) and requests lost
    per seed against the run without faults, and TTFT p99."""
    with open(os.path.join(folder, "fault_campaign.json"), encoding="utf-8") as f:
        campaign = json.load(f)
    runs = campaign["runs"]
    base, seeds = runs[0], runs[1:]
    names = [r["name"].replace("seed-", "") for r in seeds]
    what = "SLOs met (%)" if campaign["serving"] else "requests ok (%)"
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4))
    colors = ["tab:green" if r["handled"] else "tab:red" for r in seeds]
    a1.bar(names, [100 * r.get("attainment", 0) for r in seeds], color=colors)
    if "attainment" in base:
        a1.axhline(100 * base["attainment"], color="k", ls="--", lw=1, label="without faults")
        a1.legend(fontsize=7)
    a1.set_ylabel(what)
    a1.set_ylim(0, 105)
    lost = [r.get("lost", 0) for r in seeds]
    a2.bar(names, lost, color=colors)
    a2.set_ylim(0, max([1] + lost) * 1.1)
    a2.yaxis.get_major_locator().set_params(integer=True)
    a2.set_ylabel(f"requests lost (of {base.get('requests', '?')})")
    a3.bar(names, [r.get("ttft_p99_us", 0) / 1e3 for r in seeds], color=colors)
    if "ttft_p99_us" in base:
        a3.axhline(base["ttft_p99_us"] / 1e3, color="k", ls="--", lw=1, label="without faults")
        a3.legend(fontsize=7)
    a3.set_ylabel("TTFT p99 of the requests served (ms)")
    for a in (a1, a2, a3):
        a.set_xlabel("seed (red: a fault not handled)")
        a.grid(alpha=0.3, axis="y")
        a.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"Fault campaign: {campaign['scenario']} ({campaign['unhandled']} of "
                 f"{campaign['seeds']} seeds not handled)")
    _save(fig, folder, "fault_campaign")
    numbers = [(r["name"], ("handled" if r["handled"] else "UNHANDLED: " + "; ".join(r["findings"]))
                + (" | " + "; ".join(f["description"] for f in r["faults"]) if r["faults"] else ""))
               for r in runs]
    _index(folder, "kvsim fault campaign", numbers, ["fault_campaign"])
    return ["fault_campaign"]


def render_fault_sweep(folder):
    """A fault sweep (kvsim sweep --faults): per point, SLO attainment without faults, averaged
    over the seeds and at the worst seed, and the seeds not handled."""
    with open(os.path.join(folder, "fault_sweep.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in rows[0] if k not in FAULT_SWEEP_FIGURES]
    labels = ["\n".join(f"{k.split('.')[-1]}={r[k]}" for k in keys) for r in rows]
    xs = range(len(rows))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(10, 1.4 * len(rows) + 4), 4.5))
    width = 0.27
    for k, (col, name) in enumerate((("baseline_attainment", "without faults"),
                                     ("mean_attainment", "mean over seeds"),
                                     ("worst_attainment", "worst seed"))):
        a1.bar([x + (k - 1) * width for x in xs], [100 * float(r[col]) for r in rows], width,
               label=name)
    a1.set_ylabel("SLOs met / requests ok (%)")
    a1.set_ylim(0, 105)
    a1.legend(fontsize=7)
    unhandled = [int(r["unhandled"]) for r in rows]
    a2.bar(xs, unhandled, color=["tab:red" if u else "tab:green" for u in unhandled])
    a2.set_ylim(0, max([1] + [int(r["seeds"]) for r in rows]) * 1.05)
    a2.set_ylabel(f"seeds not handled (of {rows[0]['seeds']})")
    for a in (a1, a2):
        a.set_xticks(list(xs))
        a.set_xticklabels(labels, fontsize=7)
        a.grid(alpha=0.3, axis="y")
    fig.suptitle("Fault sweep: " + folder)
    _save(fig, folder, "fault_sweep")
    numbers = [(", ".join(f"{k}={r[k]}" for k in keys),
                f"{r['unhandled']} of {r['seeds']} seeds not handled, {r['lost']} requests lost; "
                f"{100 * float(r['mean_attainment']):.1f} % met on average "
                f"({100 * float(r['baseline_attainment']):.1f} % without faults)")
               for r in rows]
    _index(folder, "kvsim fault sweep", numbers, ["fault_sweep"])
    return ["fault_sweep"]


FAULT_SWEEP_FIGURES = ("seeds", "unhandled", "lost", "baseline_ok", "baseline_attainment",
                       "mean_attainment", "worst_attainment")


def render(folder):
    """Renders whatever `folder` holds (a run, a sweep, a fault campaign or a fault sweep);
    returns the image base names."""
    if os.path.exists(os.path.join(folder, "fault_sweep.csv")):
        return render_fault_sweep(folder)
    if os.path.exists(os.path.join(folder, "fault_campaign.json")):
        return render_campaign(folder)
    if os.path.exists(os.path.join(folder, "sweep.csv")):
        return render_sweep(folder)
    if os.path.exists(os.path.join(folder, "result.json")):
        return render_run(folder)
    raise FileNotFoundError(f"{folder} holds neither result.json nor sweep.csv")


if __name__ == "__main__":
    for d in sys.argv[1:]:
        print(d, render(d))
