#!/usr/bin/env python3
"""kvsim's fluid solver against SimGrid's max-min model on the same flow sets: flows per
wall-second at 64, 512 and 4,096 concurrent flows (all starting at once on a 2:1 oversubscribed
leaf-spine fabric, sizes 64 KiB..256 MiB), whole-process medians of `kvsim_flows` and
`simgrid_flows` run in turn, and the largest difference in a finish between the two.

    bench/flows_vs_simgrid.py BUILD_DIR [--runs 5]

Both processes parse the same JSON and write their results, so process start and I/O are in
both whole-process figures; each tool also reports the wall time of building and solving its
network alone ("in-process"), the solvers' own speed. The ratios are what to read (the machine
is shared and noisy).

Goal (issue 31): kvsim's flows per wall-second at least 10x SimGrid's, whole processes, at 64 and
at 4,096 concurrent flows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crossval"))
import flow_sets  # noqa: E402


def concurrent_set(flows, seed=1):
    s = flow_sets.leaf_spine(seed, flows=flows, leaves=8, hosts_per_leaf=16, spines=4,
                             window_ps=1000)  # every start at 0: all flows in flight at once
    s["name"] = f"concurrent-{flows}"
    return s


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="the build folder (holds crossval/kvsim_flows, simgrid_flows)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--flows", default="64,512,4096")
    args = ap.parse_args()
    kv = os.path.join(args.build, "crossval", "kvsim_flows")
    sg = os.path.join(args.build, "crossval", "simgrid_flows")
    print(f"{'flows':>6} {'kvsim s':>9} {'SimGrid s':>10} {'kvsim flows/s':>14} "
          f"{'SimGrid flows/s':>16} {'ratio':>6} {'in-process kvsim s':>19} "
          f"{'SimGrid s':>10} {'ratio':>6} {'max diff':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.flows.split(",")):
            path = os.path.join(tmp, f"set-{n}.json")
            with open(path, "w") as f:
                json.dump(concurrent_set(n), f)
            a, b = os.path.join(tmp, "kv.json"), os.path.join(tmp, "sg.json")
            tk, ts, ik, is_ = [], [], [], []
            for _ in range(args.runs):  # alternate, so drift hits both alike
                tk.append(timed([kv, path, a]))
                ts.append(timed([sg, path, b]))
                with open(a) as f:
                    ok = json.load(f)
                with open(b) as f:
                    os_ = json.load(f)
                ik.append(ok["wall_seconds"])
                is_.append(os_["wall_seconds"])
            fk = {r["id"]: r["finish_ps"] / 1e12 for r in ok["flows"]}
            fs = {r["id"]: r["finish_s"] for r in os_["flows"]}
            diff = max(abs(fk[i] - fs[i]) for i in fk)
            mk, ms = statistics.median(tk), statistics.median(ts)
            mik, mis = statistics.median(ik), statistics.median(is_)
            print(f"{n:>6} {mk:>9.3f} {ms:>10.3f} {n / mk:>14.0f} {n / ms:>16.0f} "
                  f"{ms / mk:>6.2f} {mik:>19.5f} {mis:>10.5f} {mis / mik:>6.1f} "
                  f"{diff * 1e12:>7.1f}ps")


if __name__ == "__main__":
    main()
