"""An exact reference for flow sets: weighted max-min fair sharing with rational arithmetic.

Every capacity, size, weight and time is a Fraction (a JSON double converts exactly), so rates
and finish times carry no rounding at all. Progressive filling from scratch at every event, so
meant for small sets: it decides, where kvsim and SimGrid disagree, which one is right.
"""

from fractions import Fraction

PS = Fraction(1, 10**12)


def max_min_rates(flows, capacity):
    """Rates of `flows` ({id: {'path': [(resource, weight)], 'cap': Fraction or None}}): every
    unfrozen flow rises at one level until a resource it crosses is full or it reaches its cap."""
    rate = {}
    unfrozen = set(flows)
    used = {}  # resource -> load of the flows frozen so far
    while unfrozen:
        weight = {}
        for f in unfrozen:
            for res, wt in flows[f]["path"]:
                weight[res] = weight.get(res, 0) + wt
        shares = {r: (capacity[r] - used.get(r, 0)) / w for r, w in weight.items()}
        level = min(shares.values())
        caps = [flows[f]["cap"] for f in unfrozen if flows[f]["cap"] is not None]
        if caps:
            level = min(level, min(caps))
        full = {r for r, s in shares.items() if s == level}
        frozen = {f for f in unfrozen
                  if flows[f]["cap"] == level or any(res in full for res, _ in flows[f]["path"])}
        for f in frozen:
            rate[f] = level
            for res, wt in flows[f]["path"]:
                used[res] = used.get(res, 0) + level * wt
        unfrozen -= frozen
    return rate


def finish_times(flow_set):
    """Exact finish time (seconds, a Fraction) of every flow of a flow set (crossval JSON), by id."""
    capacity = {i: Fraction(r["capacity"]) for i, r in enumerate(flow_set["resources"])}
    pending = sorted(flow_set["flows"], key=lambda f: f["start_ps"])
    changes = sorted(flow_set.get("capacity_changes", []), key=lambda c: c["at_ps"])
    active = {}
    finish = {}
    now = Fraction(0)
    while pending or active or changes:
        rates = max_min_rates(active, capacity) if active else {}
        candidates = [now + a["left"] / rates[f] for f, a in active.items()]
        if pending:
            candidates.append(pending[0]["start_ps"] * PS)
        if changes:
            candidates.append(changes[0]["at_ps"] * PS)
        t_next = min(candidates)
        for f, a in active.items():
            a["left"] -= rates[f] * (t_next - now)
        now = t_next
        for f in [f for f, a in active.items() if a["left"] == 0]:
            finish[f] = now
            del active[f]
        while changes and changes[0]["at_ps"] * PS == now:
            c = changes.pop(0)
            capacity[c["resource"]] = Fraction(c["capacity"])
        while pending and pending[0]["start_ps"] * PS == now:
            f = pending.pop(0)
            active[f["id"]] = {
                "left": Fraction(f["bytes"]),
                "path": [(h["resource"], Fraction(h.get("weight", 1.0))) for h in f["path"]],
                "cap": Fraction(f["cap"]) if f.get("cap") is not None else None,
            }
    return finish
