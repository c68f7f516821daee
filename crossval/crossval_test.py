"""The cross-validation tier (ctest -L crossval): the same flow sets through kvsim's fluid
network, the SystemC Fabric (recorded runs), SimGrid's max-min model (CM02) and an exact rational
reference; every flow's finish time is compared and the comparison is written as a report table
(crossval-report.md and .json next to the test's build folder).
"""

import json
import os
import subprocess
import sys
from fractions import Fraction

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import exact_maxmin  # noqa: E402
import flow_sets  # noqa: E402

KVSIM_FLOWS = os.environ["KVSIM_FLOWS"]
KVSIM_FABRIC_FLOWS = os.environ["KVSIM_FABRIC_FLOWS"]
SIMGRID_FLOWS = os.environ["SIMGRID_FLOWS"]
OUT = os.path.join(os.environ["KVSIM_CROSSVAL_OUT"], "crossval")
SOURCE = os.environ["KVSIM_SOURCE_DIR"]

# kvsim keeps time in integer picoseconds: each completion is rounded up to the next ps and later
# rates start from there, and rates are doubles (relative error ~1e-15). Against the exact
# solution a finish may thus be off by about 1 ps per earlier event on its resources: 1e-9
# relative plus 100 ps bounds that with room for a hundred events.
KVSIM_REL, KVSIM_ABS = 1e-9, 100e-12
# SimGrid as simgrid_flows sets it (maxmin/precision 1e-12, surf/precision 1e-13 s): relative
# errors of ~1e-15 and under 0.1 ps per merged event against the exact solution; comparing it
# with kvsim adds kvsim's own bound above.
SIMGRID_REL, SIMGRID_ABS = 1e-9, 100e-12

os.makedirs(OUT, exist_ok=True)
ROWS = []


def write(flow_set):
    path = os.path.join(OUT, flow_set["name"] + ".json")
    with open(path, "w") as f:
        json.dump(flow_set, f)
    return path


def run(*cmd):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"


def kvsim_fluid_ps(path):
    out = path.replace(".json", ".kvsim.json")
    run(KVSIM_FLOWS, path, out)
    with open(out) as f:
        return {r["id"]: r["finish_ps"] for r in json.load(f)["flows"]}


def kvsim_fluid(path):
    return {i: ps / 1e12 for i, ps in kvsim_fluid_ps(path).items()}


def simgrid(path):
    out = path.replace(".json", ".simgrid.json")
    run(SIMGRID_FLOWS, path, out)
    with open(out) as f:
        return {r["id"]: r["finish_s"] for r in json.load(f)["flows"]}


def worst(a, b):
    """(largest absolute difference in s, largest relative difference) between two runs, each
    over all flows (not necessarily the same flow)."""
    assert a.keys() == b.keys(), "the runs finished different flows"
    if not a:
        return (0.0, 0.0)
    return (max(abs(a[i] - b[i]) for i in a),
            max(abs(a[i] - b[i]) / max(abs(float(b[i])), 1e-30) for i in a))


def beyond(a, b, rel, abs_):
    return [i for i in a if abs(float(a[i]) - float(b[i])) > abs_ + rel * abs(float(b[i]))]


def compare(flow_set, fabric=None, exact=True):
    """Runs a set everywhere, records the row, and asserts agreement; where kvsim and SimGrid
    disagree beyond SimGrid's tolerance, the exact reference decides and the failure says who."""
    path = write(flow_set)
    kv = kvsim_fluid(path)
    sg = simgrid(path)
    ex = None
    if exact:
        ex = {i: t for i, t in exact_maxmin.finish_times(flow_set).items()}
    row = {"set": flow_set["name"], "description": flow_set.get("description", ""),
           "flows": len(flow_set["flows"]), "resources": len(flow_set["resources"]),
           "kvsim_vs_simgrid": worst(kv, sg)}
    if ex is not None:
        exf = {i: float(t) for i, t in ex.items()}
        row["kvsim_vs_exact"] = worst(kv, exf)
        row["simgrid_vs_exact"] = worst(sg, exf)
    if fabric is not None:
        row["fabric_vs_kvsim_fluid"] = worst(fabric, kv)
        row["fabric_vs_simgrid"] = worst(fabric, sg)
    ROWS.append(row)
    if fabric is not None:
        # The Fabric drives the same solver: its finishes equal the replay's, to the picosecond.
        fabric_ps = {f["id"]: f["fabric_finish_ps"] for f in flow_set["flows"]}
        replay_ps = kvsim_fluid_ps(path)
        off_ps = [i for i in fabric_ps if fabric_ps[i] != replay_ps[i]]
        assert not off_ps, f"{flow_set['name']}: the Fabric's finishes differ from the fluid " \
                           f"replay on flows {off_ps[:10]}"
    off = beyond(kv, sg, SIMGRID_REL, SIMGRID_ABS)
    if off:
        if ex is None:
            ex = exact_maxmin.finish_times(flow_set)
        kv_wrong = beyond(kv, {i: float(t) for i, t in ex.items()}, KVSIM_REL, KVSIM_ABS)
        sg_wrong = beyond(sg, {i: float(t) for i, t in ex.items()}, SIMGRID_REL, SIMGRID_ABS)
        pytest.fail(f"{flow_set['name']}: kvsim and SimGrid differ on flows {off[:10]}; the exact "
                    f"reference says kvsim is wrong on {kv_wrong[:10]} and SimGrid on "
                    f"{sg_wrong[:10]}")
    if ex is not None:
        wrong = beyond(kv, {i: float(t) for i, t in ex.items()}, KVSIM_REL, KVSIM_ABS)
        assert not wrong, f"{flow_set['name']}: kvsim differs from the exact solution on {wrong}"
    return kv, sg


def test_closed_forms():
    # One flow alone: bytes / capacity, exactly, everywhere.
    s = {"name": "closed-form-alone", "resources": [{"name": "l", "capacity": 25e9}],
         "flows": [{"id": 0, "bytes": 5e7, "start_ps": 0, "path": [{"resource": 0}]}]}
    kv, sg = compare(s)
    assert kv[0] == pytest.approx(2e-3, abs=1e-12) and sg[0] == pytest.approx(2e-3, rel=1e-9)
    # Parking lot: the long flow gets half of every link while the short ones run.
    lot = flow_sets.parking_lot()
    lot["name"] = "closed-form-parking-lot"
    kv, sg = compare(lot)
    assert exact_maxmin.finish_times(flow_sets.parking_lot())[1] == Fraction(8_000_000, 12_500_000_000)
    assert kv[1] == pytest.approx(640e-6, abs=1e-12)


@pytest.mark.parametrize("make", [flow_sets.single_link, flow_sets.parking_lot,
                                  flow_sets.weights_and_caps, flow_sets.degrading_link])
def test_hand_built_sets(make):
    compare(make())


@pytest.mark.parametrize("seed", [1, 2])
def test_small_random_leaf_spine(seed):
    compare(flow_sets.small_random(seed))


@pytest.mark.parametrize("seed", [1, 2])
def test_random_leaf_spine_fabric(seed):
    compare(flow_sets.leaf_spine(seed))


def recorded(name, mode, first, *overrides):
    path = os.path.join(OUT, name + ".json")
    run(KVSIM_FABRIC_FLOWS, mode, first, path, *overrides)
    with open(path) as f:
        s = json.load(f)
    s["name"] = name
    fabric = {r["id"]: r["fabric_finish_ps"] / 1e12 for r in s["flows"]}
    return s, fabric


@pytest.mark.parametrize("seed", [1, 2])
def test_fabric_random_batches_with_a_degrading_link(seed):
    s, fabric = recorded(f"fabric-random-{seed}", "fabric-random", str(seed))
    assert s["capacity_changes"], "the degrade event was not recorded"
    compare(s, fabric=fabric)


# pa-block16's 20,480 flows would take SimGrid's solver ~20 min (it grows with the square of the
# flows sharing a link); these two give ~5,000 each.
def test_fabric_random_batches_on_an_oversubscribed_leaf_spine():
    # Four A2 servers, two per leaf, two spines at 2:1, NICs shared by two NPUs each.
    s, fabric = recorded("fabric-leaf-spine", "fabric-random", "3", "nodes=4",
                         "fabric.nics_per_node=4", "fabric.nodes_per_leaf=2", "fabric.spines=2",
                         "fabric.oversubscription=2")
    assert any(r["name"].startswith("leaf") for r in s["resources"]), "no flow crossed a spine"
    compare(s, fabric=fabric)


@pytest.mark.parametrize("scenario", ["a2-llama70b-roce", "a3-hccs"])
def test_a_scenarios_transfers(scenario):
    s, fabric = recorded("scenario-" + scenario, "record",
                         os.path.join(SOURCE, "scenarios", "library", scenario + ".yaml"))
    compare(s, fabric=fabric, exact=len(s["flows"]) <= 400)


def test_the_comparison_catches_a_broken_solver():
    # A solver that ignored weights (every HBM copy counted once) must be caught: run kvsim on the
    # set with weights dropped and compare with SimGrid on the real set.
    s = flow_sets.weights_and_caps()
    broken = json.loads(json.dumps(s))
    broken["name"] = "weights-dropped"
    for f in broken["flows"]:
        for h in f["path"]:
            h["weight"] = 1.0
    kv = kvsim_fluid(write(broken))
    sg = simgrid(write(s))
    assert beyond(kv, sg, SIMGRID_REL, SIMGRID_ABS)


def test_zz_write_the_report():
    # Runs last (pytest keeps file order): the table of every comparison above.
    assert ROWS, "no comparison ran"
    with open(os.path.join(OUT, "crossval-report.json"), "w") as f:
        json.dump(ROWS, f, indent=1)

    def cell(pair):
        return "—" if pair is None else f"{pair[0] * 1e12:.3g} ps / {pair[1]:.2g}"

    lines = ["| set | flows | resources | kvsim vs SimGrid | kvsim vs exact | SimGrid vs exact "
             "| Fabric vs fluid replay | Fabric vs SimGrid |",
             "|---|---|---|---|---|---|---|---|"]
    for r in ROWS:
        lines.append(f"| {r['set']} | {r['flows']} | {r['resources']} | "
                     f"{cell(r['kvsim_vs_simgrid'])} | {cell(r.get('kvsim_vs_exact'))} | "
                     f"{cell(r.get('simgrid_vs_exact'))} | {cell(r.get('fabric_vs_kvsim_fluid'))} | "
                     f"{cell(r.get('fabric_vs_simgrid'))} |")
    with open(os.path.join(OUT, "crossval-report.md"), "w") as f:
        f.write("Largest difference in a flow's finish time (absolute / relative)\n\n")
        f.write("\n".join(lines) + "\n")
