"""A what-if study from Python: Llama-3-70B (TP8, one 4k prompt) between two A2 servers, layer-wise
transfer_cache_async over RoCE at 100, 200 and 400 Gb/s. kvsim.sweep runs the points as
`kvsim sweep` does and returns their results; the script plots exposed transfer against link
bandwidth (matplotlib, Agg).

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/what_if_study.py [output folder]
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import kvsim  # noqa: E402

BANDWIDTHS_GBPS = [100, 200, 400]


def main(out_dir):
    study = kvsim.sweep("a2-llama70b-roce",
                        set={"workload.requests": 1,
                             "hardware.scale_out.bandwidth": [f"{b}Gb/s" for b in BANDWIDTHS_GBPS]},
                        jobs=2)
    print(f"{'link':>9} {'exposed':>11} {'share of TTFT':>14} {'effective KV bw':>16}")
    for gbps, result in zip(BANDWIDTHS_GBPS, study):
        assert result.ok, result.summary
        print(f"{gbps:>5} Gb/s {result.mean_exposed_us:>8.1f} us "
              f"{result.exposed_share_pct:>12.2f} % {result.effective_gbps:>11.2f} GB/s")
    exposed = [r.mean_exposed_us for r in study]
    assert exposed == sorted(exposed, reverse=True), "a faster link must not expose more transfer"

    os.makedirs(out_dir, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(BANDWIDTHS_GBPS, exposed, marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xticks(BANDWIDTHS_GBPS, [f"{b}" for b in BANDWIDTHS_GBPS])
    ax.set_xlabel("RoCE bandwidth per NIC (Gb/s)")
    ax.set_ylabel("exposed KV transfer (us)")
    ax.set_title("Llama-3-70B TP8, 4k prompt, A2 to A2, 128-token blocks")
    ax.grid(True, alpha=0.3)
    path = os.path.join(out_dir, "exposed_vs_bandwidth.png")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"plot: {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "what_if_study"))
