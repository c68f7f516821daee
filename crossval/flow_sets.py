"""The synthetic flow sets of the cross-validation tier, built deterministically from seeds.

Capacities are bytes/s, sizes bytes, times integer picoseconds (crossval/README.md). Link speeds
are the presets' round figures: 25e9 B/s is one 200 Gb/s NIC.
"""

import random

US = 10**6  # ps
NIC = 25e9


def _flow(i, nbytes, start_ps, path, cap=None):
    f = {"id": i, "bytes": float(nbytes), "start_ps": int(start_ps),
         "path": [{"resource": r, "weight": float(w)} for r, w in path]}
    if cap is not None:
        f["cap"] = float(cap)
    return f


def single_link():
    """Four flows on one 200 Gb/s link, two of them starting later."""
    flows = [_flow(0, 1_000_000, 0, [(0, 1)]), _flow(1, 4_000_000, 0, [(0, 1)]),
             _flow(2, 16_000_000, 100 * US, [(0, 1)]), _flow(3, 2_500_000, 500 * US, [(0, 1)])]
    return {"name": "single-link", "description": "4 flows, 1 link of 200 Gb/s, staggered starts",
            "resources": [{"name": "link", "capacity": NIC}], "flows": flows}


def parking_lot(hops=4):
    """One long flow over `hops` links, one short flow per link, and a second wave later."""
    res = [{"name": f"l{i}", "capacity": NIC} for i in range(hops)]
    flows = [_flow(0, 64_000_000, 0, [(i, 1) for i in range(hops)])]
    for i in range(hops):
        flows.append(_flow(len(flows), 8_000_000 * (i + 1), 0, [(i, 1)]))
    for i in range(0, hops, 2):
        flows.append(_flow(len(flows), 3_000_000, 700 * US, [(i, 1), (i + 1, 1)]))
    return {"name": "parking-lot", "description": f"1 flow over {hops} links, 1 per link, a wave",
            "resources": res, "flows": flows}


def weights_and_caps():
    """Copies inside one HBM (weight 2) sharing it with transfers, and capped flows."""
    res = [{"name": "hbm0", "capacity": 500e9}, {"name": "nic0", "capacity": NIC},
           {"name": "nic1", "capacity": NIC}, {"name": "engine0", "capacity": 400e9}]
    flows = [_flow(0, 800_000_000, 0, [(0, 2), (3, 1)]),
             _flow(1, 600_000_000, 0, [(0, 2), (3, 1)]),
             _flow(2, 50_000_000, 0, [(0, 1), (1, 1)]),
             _flow(3, 50_000_000, 10 * US, [(0, 1), (1, 1), (2, 1)], cap=5e9),
             _flow(4, 20_000_000, 20 * US, [(2, 1)], cap=30e9),
             _flow(5, 400_000_000, 30 * US, [(0, 2)], cap=300e9)]
    return {"name": "weights-and-caps", "description": "weight-2 HBM copies and rate caps",
            "resources": res, "flows": flows}


def degrading_link():
    """A chain of three links; the middle one drops to 30 % mid-flight and recovers."""
    res = [{"name": f"l{i}", "capacity": NIC} for i in range(3)]
    flows = [_flow(0, 40_000_000, 0, [(0, 1), (1, 1), (2, 1)]),
             _flow(1, 20_000_000, 0, [(1, 1)]),
             _flow(2, 30_000_000, 50 * US, [(0, 1), (1, 1)]),
             _flow(3, 10_000_000, 300 * US, [(2, 1)]),
             _flow(4, 25_000_000, 900 * US, [(1, 1), (2, 1)])]
    changes = [{"at_ps": 400 * US, "resource": 1, "capacity": 0.3 * NIC},
               {"at_ps": 1500 * US, "resource": 1, "capacity": NIC}]
    return {"name": "degrading-link", "description": "middle link at 30 % from 0.4 to 1.5 ms",
            "resources": res, "flows": flows, "capacity_changes": changes}


def leaf_spine(seed, flows=300, leaves=4, hosts_per_leaf=8, spines=2, oversubscription=2.0,
               window_ps=20_000 * US):
    """Random flows of mixed sizes and start times on a 2:1 oversubscribed leaf-spine fabric:
    a NIC per host (up and down), uplinks from every leaf to every spine, an HBM per host that
    local copies cross twice, ECMP by (source + destination) mod spines, and some capped flows."""
    rng = random.Random(seed)
    res = []

    def add(name, cap):
        res.append({"name": name, "capacity": float(cap)})
        return len(res) - 1

    hosts = leaves * hosts_per_leaf
    up = [add(f"h{h}.up", NIC) for h in range(hosts)]
    down = [add(f"h{h}.down", NIC) for h in range(hosts)]
    hbm = [add(f"h{h}.hbm", 1.6e12) for h in range(hosts)]
    uplink = hosts_per_leaf * NIC / oversubscription / spines
    to_spine = [[add(f"leaf{l}-spine{s}", uplink) for s in range(spines)] for l in range(leaves)]
    from_spine = [[add(f"spine{s}-leaf{l}", uplink) for s in range(spines)] for l in range(leaves)]
    out = []
    for i in range(flows):
        src = rng.randrange(hosts)
        nbytes = int(2 ** rng.uniform(16, 28))  # 64 KiB .. 256 MiB, log-uniform
        start = rng.randrange(0, window_ps // 1000) * 1000  # ns grid
        if rng.random() < 0.1:  # a copy inside one HBM: read and write
            path = [(hbm[src], 2)]
        else:
            dst = rng.randrange(hosts - 1)
            dst += dst >= src
            path = [(hbm[src], 1), (up[src], 1), (down[dst], 1), (hbm[dst], 1)]
            ls, ld = src // hosts_per_leaf, dst // hosts_per_leaf
            if ls != ld:
                s = (src + dst) % spines
                path += [(to_spine[ls][s], 1), (from_spine[ld][s], 1)]
        cap = 5e9 if rng.random() < 0.1 else None
        out.append(_flow(i, nbytes, start, path, cap))
    return {"name": f"leaf-spine-{seed}",
            "description": f"{flows} random flows, {leaves} leaves x {hosts_per_leaf} hosts, "
                           f"{spines} spines, {oversubscription:g}:1 oversubscribed, seed {seed}",
            "resources": res, "flows": out}


def small_random(seed, flows=24):
    """A small leaf-spine set the exact reference can solve in well under a second."""
    s = leaf_spine(seed, flows=flows, leaves=2, hosts_per_leaf=4, window_ps=2_000 * US)
    s["name"] = f"small-leaf-spine-{seed}"
    return s


def synthetic():
    """Every synthetic set of the tier, in report order."""
    return [single_link(), parking_lot(), weights_and_caps(), degrading_link(),
            small_random(1), small_random(2), leaf_spine(1), leaf_spine(2)]
