"""Seeded fault campaigns on launched programs (kvsim launch --faults SEEDS).

A seed draws a fault schedule from the plan: `count` faults of the plan's kinds. A link fault
takes down or degrades the RoCE links of a node that runs one of the launch's processes (scope
"node": its switch port or cable, so every path in and out of the node) or one NIC of such a node
(scope "nic"), starting at a time drawn from the window and lasting a drawn duration. A device
out of memory (device_oom) makes every HBM allocation on a node's devices (scope "node") or on one
device (scope "nic") fail for a drawn time, as a full HBM does (another tenant's memory or
fragmentation [I]): aclrtMalloc and the library's allocate_cache then return their
out-of-memory errors. A completion delay (completion_delay) makes every copy that a node's
devices (or one device's) engines complete in a drawn window report its outcome `delay` seconds
late, as a stuck completion queue would [I]: the bytes land on time, and a caller waiting with a
timeout meets it. A queue stall (queue_stall) makes those engines take nothing new from their
queues for a drawn time, as a transfer queue that fills and stops draining [I]: copies posted
meanwhile wait, then drain. A process
kill ends one of the plan's processes (default: any) with SIGKILL at a time drawn from the
window: no more of its code runs, its engines vanish without a word to their peers, and the
driver frees its device memory. The schedule goes into the world
before the programs start, so a seed replays exactly (simulated time, seeded draws); with a
lifecycle trigger (`during: link_clusters`, ...), at the first such llm_datadist call of any
program instead, its times counted from there, which replays alike. After the
launch, the verdict lists what the programs did not handle: a process that ended with an error
(an uncaught exception), one that never ended (a hang), or the world left holding memory,
engines or jobs once every process ended (a leak). Several seeds make a campaign: one launch per seed, run in parallel, summarised.
"""
import dataclasses
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import List, Tuple

from kvsim.launch.spec import LaunchError

KINDS = ("link_down", "link_degraded", "process_killed", "device_oom", "completion_delay",
         "queue_stall")
DEVICE_KINDS = ("device_oom", "completion_delay", "queue_stall")  # drawn over device_targets()
KILLED = 128 + 9  # the exit status of a process killed by SIGKILL
# Lifecycle points a plan's faults may start from (`during`): the llm_datadist calls
# (LaunchServer.set_call_hook's names).
TRIGGERS = ("init", "link_clusters", "register", "pull_cache", "pull_blocks", "push_cache",
            "push_blocks", "unlink_clusters", "finalize")
MAX_SEEDS = 10_000
MAX_FAULTS = 1_000


@dataclasses.dataclass
class FaultPlan:
    """What a seed may draw (launch file key `faults`; every field has a default)."""
    kinds: Tuple[str, ...] = ("link_down", "link_degraded")
    window: Tuple[float, float] = (0.0, 0.05)   # simulated seconds from the start
    count: int = 1
    duration: Tuple[float, float] = (0.001, 0.05)
    factor: float = 0.1                         # link_degraded: fraction of the bandwidth left
    delay: float = 2.0                          # completion_delay: seconds late [I]
    scope: str = "node"                         # "node": all of a node's NICs; "nic": one NIC
    processes: Tuple[str, ...] = ()             # process_killed: who may die (empty: anyone)
    during: str = ""                            # a lifecycle trigger (TRIGGERS): the window
                                                # counts from the first such call, not the start


@dataclasses.dataclass
class Fault:
    """One injected fault."""
    kind: str
    target: str          # "node 1", "roce n1d3", "device n1d3" or "process decode"
    links: List[str]     # the world's links it takes down or degrades (none for a kill)
    at: float
    until: float
    factor: float = 1.0
    devices: List[int] = dataclasses.field(default_factory=list)  # device_oom, completion_delay
    delay: float = 0.0                                            # completion_delay
    trigger: str = ""  # the plan's `during`: times count from the first such call until it fires

    def describe(self):
        text = self._describe()
        return f"{text} (from the first {self.trigger} call)" if self.trigger else text

    def _describe(self):
        if self.kind == "process_killed":
            return f"{self.target} killed (SIGKILL) at t={self.at:.6f} s"
        if self.kind == "device_oom":
            where = f"{self.target}'s devices" if self.target.startswith("node") else self.target
            return f"{where} out of memory from t={self.at:.6f} s to t={self.until:.6f} s"
        if self.kind == "completion_delay":
            who = f"{self.target}'s devices'" if self.target.startswith("node") else \
                f"{self.target}'s"
            return (f"{who} copy completions {self.delay:g} s late from t={self.at:.6f} s to "
                    f"t={self.until:.6f} s")
        if self.kind == "queue_stall":
            who = f"{self.target}'s devices'" if self.target.startswith("node") else \
                f"{self.target}'s"
            return f"{who} transfer queues stalled from t={self.at:.6f} s to t={self.until:.6f} s"
        what = ("down" if self.kind == "link_down"
                else f"degraded to {self.factor:g} of their bandwidth")
        where = f"{self.target}'s RoCE links" if self.target.startswith("node") else self.target
        return f"{where} {what} from t={self.at:.6f} s to t={self.until:.6f} s"


def parse_seeds(text):
    """'7', '1-20' or '1,4,9-12' as a list of seeds; LaunchError naming --faults otherwise."""
    seeds = []
    for part in str(text).split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise LaunchError(f"--faults {text!r}: expected SEED, FIRST-LAST or a comma-separated "
                              "list of them (non-negative integers)") from None
        if first < 0 or last < first or last > 2**63 - 1:
            raise LaunchError(f"--faults {text!r}: {part.strip()!r} is not a range of seeds in "
                              "[0, 2^63-1] with FIRST <= LAST")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise LaunchError(f"--faults {text!r}: at most {MAX_SEEDS} seeds per campaign")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        raise LaunchError(f"--faults {text!r}: a seed is given twice")
    return seeds


def plan_from_node(node):
    """A FaultPlan from the launch file's `faults` mapping (spec._Node); errors name the key."""
    fields = node.mapping({"kinds", "window", "count", "duration", "factor", "delay", "scope",
                           "processes", "during"})
    plan = FaultPlan()
    if "kinds" in fields:
        kinds = tuple(item.text() for item in fields["kinds"].sequence())
        for k, item in zip(kinds, fields["kinds"].sequence()):
            if k not in KINDS:
                item.fail(f"unknown fault kind {k!r} (known: {', '.join(KINDS)})")
        if not kinds:
            fields["kinds"].fail("no kinds")
        plan.kinds = kinds
    for key in ("window", "duration"):
        if key in fields:
            items = fields[key].sequence()
            if len(items) != 2:
                fields[key].fail("expected [FIRST, LAST] in seconds")
            lo, hi = items[0].number(0.0), items[1].number(0.0)
            if hi < lo or hi > 3600:
                fields[key].fail(f"[{lo}, {hi}] must have FIRST <= LAST <= 3600 s")
            setattr(plan, key, (lo, hi))
    if "scope" in fields:
        plan.scope = fields["scope"].text()
        if plan.scope not in ("node", "nic"):
            fields["scope"].fail(f"{plan.scope!r} is not 'node' or 'nic'")
    if "count" in fields:
        plan.count = fields["count"].integer(1, MAX_FAULTS)
    if "processes" in fields:
        names = tuple(item.text() for item in fields["processes"].sequence())
        if not names:
            fields["processes"].fail("no processes (leave the key out to let any process die)")
        plan.processes = names
    if "factor" in fields:
        plan.factor = fields["factor"].number(0.0)
        if not 0 < plan.factor <= 1:
            fields["factor"].fail(f"{plan.factor} must be in (0, 1]")
    if "during" in fields:
        plan.during = fields["during"].text()
        if plan.during not in TRIGGERS:
            fields["during"].fail(f"{plan.during!r} is not a lifecycle call "
                                  f"(one of {', '.join(TRIGGERS)})")
    if "delay" in fields:
        plan.delay = fields["delay"].number(0.0)
        if not 0 < plan.delay <= 3600:
            fields["delay"].fail(f"{plan.delay} must be in (0, 3600] seconds")
    return plan


def targets(world, nodes, scope):
    """What a fault may hit: (target, its links) per node that runs a process (scope "node") or
    per NIC of such a node (scope "nic"), from the world's RoCE links ("roce n<node>d<dev>")."""
    out = []
    for n in sorted(set(nodes)):
        nics = [name for name in world.links if name.startswith(f"roce n{n}d")]
        if scope == "node":
            out += [(f"node {n}", nics)] if nics else []
        else:
            out += [(name, [name]) for name in nics]
    return out


def device_targets(world, nodes, scope):
    """What a device_oom or completion_delay may hit: (target, its devices) per node that runs a
    process (scope "node") or per device of such a node (scope "nic")."""
    per_node = world.device_count // world.nodes
    out = []
    for n in sorted(set(nodes)):
        devices = [d for d in range(world.device_count) if world.node_of(d) == n]
        if scope == "node":
            out += [(f"node {n}", devices)] if devices else []
        else:
            out += [(f"device n{n}d{d - n * per_node}", [d]) for d in devices]
    return out


def draw(plan, seed, candidates, processes=(), devices=()) -> List[Fault]:
    """The faults of one seed, in time order (the same seed, plan, candidates, processes and
    devices: the same faults). `candidates`: targets(); `processes`: the launch's process names,
    in order; `devices`: device_targets()."""
    victims = list(plan.processes or processes)
    if not candidates and any(k in ("link_down", "link_degraded") for k in plan.kinds):
        raise LaunchError("--faults: the launch's nodes have no RoCE link to fail")
    if not devices and any(k in DEVICE_KINDS for k in plan.kinds):
        raise LaunchError("--faults: the launch's nodes have no device to fail")
    if not victims and "process_killed" in plan.kinds:
        raise LaunchError("--faults: the launch has no process to kill")
    rng = random.Random(seed)
    drawn = []
    for _ in range(plan.count):
        kind = rng.choice(plan.kinds)
        if kind == "process_killed":
            victim = rng.choice(victims)
            at = rng.uniform(*plan.window)
            drawn.append((at, 0.0, kind, f"process {victim}", []))
            continue
        target, links = rng.choice(devices if kind in DEVICE_KINDS else candidates)
        at = rng.uniform(*plan.window)
        drawn.append((at, rng.uniform(*plan.duration), kind, target, list(links)))
    # Faults on one target never overlap (one's end would end the other early): a fault that
    # would starts when the earlier one ends.
    faults, ends = [], {}
    for at, duration, kind, target, links in sorted(drawn, key=lambda d: (d[0], d[3])):
        on_devices = kind in DEVICE_KINDS
        key = (kind if on_devices else "links", target)  # memory, completions, links: apart
        at = max(at, ends.get(key, 0.0))
        ends[key] = at + duration
        faults.append(Fault(kind, target, [] if on_devices else links, at, at + duration,
                            plan.factor if kind == "link_degraded" else 1.0,
                            links if on_devices else [],
                            plan.delay if kind == "completion_delay" else 0.0, plan.during))
    return sorted(faults, key=lambda f: (f.at, f.target))


def inject(world, faults, start):
    """Schedules the link faults, `start` seconds being the launch's time zero (process kills
    are the launcher's: victim())."""
    for f in faults:
        for device in f.devices:
            if f.kind == "completion_delay":
                world.schedule_completion_delay(device, start + f.at, start + f.until, f.delay)
            elif f.kind == "queue_stall":
                world.schedule_queue_stall(device, start + f.at, start + f.until)
            else:
                world.schedule_device_oom(device, start + f.at, start + f.until)
        for link in f.links:
            if f.kind == "link_down":
                world.schedule_link_event(link, start + f.at, "down")
            else:
                world.schedule_link_event(link, start + f.at, "degrade", f.factor)
            world.schedule_link_event(link, start + f.until, "up")


def victim(fault):
    """The process a process_killed fault kills (None for a link fault)."""
    return fault.target[len("process "):] if fault.kind == "process_killed" else None


def killed_by(faults, name, code):
    """Whether process `name`, ended with `code`, was killed by one of `faults` (its status is
    then the fault's, neither a finding nor the launch's)."""
    return code == KILLED and any(victim(f) == name for f in faults)


def verdict(ends, world_after, faults=(), jobs=()):
    """What the programs did not handle. `ends`: (name, exit code or None, last error line) per
    process; `world_after`: the world's inventory once the launch ended; `faults`: the seed's
    (a process one of them killed is not a finding); `jobs`: the world's jobs still waiting,
    named in a leak."""
    findings = []
    for name, code, error in ends:
        if killed_by(faults, name, code):
            continue
        if code is None:
            findings.append({"kind": "hang", "process": name, "detail": "did not end"})
        elif code != 0:
            findings.append({"kind": "uncaught", "process": name,
                             "detail": f"exited {code}" + (f": {error}" if error else "")})
    left = []
    if any(world_after["memory_bytes"]):
        left.append(f"{sum(world_after['memory_bytes'])} bytes of memory allocated")
    if world_after["engines"]:
        left.append(f"{len(world_after['engines'])} engine(s) initialized")
    if world_after["live_jobs"]:
        left.append(f"{world_after['live_jobs']} job(s) running" +
                    (f": {', '.join(jobs)}" if jobs else ""))
    if left and all(code is not None for _, code, _ in ends):
        findings.append({"kind": "leak", "process": "", "detail": ", ".join(left)})
    return findings


def last_error_line(path):
    """The last non-empty line of a process's stderr file (its exception, if it died of one)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def report_lines(seed, faults, findings, replay):
    lines = [f"kvsim launch: faults (seed {seed}): " +
             ("; ".join(f.describe() for f in faults) or "none")]
    if not findings:
        lines.append(f"kvsim launch: seed {seed}: every injected fault was handled")
    for f in findings:
        who = f"{f['process']} " if f["process"] else ""
        lines.append(f"kvsim launch: seed {seed}: UNHANDLED {f['kind']}: {who}{f['detail']}")
    if findings:
        lines.append(f"kvsim launch: replay with: {replay}")
    return lines


# Options that belong to a campaign, not to one seed's launch (each takes a value).
_CAMPAIGN_OPTIONS = ("--faults", "-j", "--jobs", "--dask")
# ... and those a replay on the terminal leaves out too.
_OUTPUT_OPTIONS = ("--fault-report", "--output-dir")


def _one_seed(argv, seed, drop):
    """`argv` without the options in `drop` (before '--'; the programs' own words stay), with
    --faults SEED before the commands."""
    out, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == "--":
            out += argv[i:]
            break
        if word in drop:
            skip = True
            continue
        if word.startswith(tuple(o + "=" for o in drop)):
            continue
        out.append(word)
    return _insert_before_commands(out, ["--faults", str(seed)])


def replay_command(argv, seed):
    """The kvsim launch command that replays one seed of `argv` (to the terminal: without the
    campaign's options and output directory)."""
    return " ".join(["kvsim", "launch"] +
                    _one_seed(argv, seed, _CAMPAIGN_OPTIONS + _OUTPUT_OPTIONS))


def run_seed(argv, seed, root, cwd):
    """One seed of a campaign: `kvsim launch argv` with --faults SEED in a child process, its
    outputs in root/seed-SEED/; returns its report (faults, findings, the replay command). Runs
    where the campaign runs it: a thread here, or a Dask worker that sees `root`, `cwd` and the
    programs at the same paths."""
    out = os.path.join(root, f"seed-{seed}")
    report = os.path.join(out, "faults.json")
    os.makedirs(out, exist_ok=True)
    words = _insert_before_commands(_one_seed(argv, seed, _CAMPAIGN_OPTIONS),
                                    ["--fault-report", report, "--output-dir", out])
    cmd = [sys.executable, "-m", "kvsim.launch"] + words
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          errors="replace", check=False, cwd=cwd)
    try:
        with open(report, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        tail = proc.stderr.strip().splitlines()[-1:]
        data = {"seed": seed, "faults": [], "findings": [
            {"kind": "launch failed", "process": "",
             "detail": f"exit {proc.returncode}" + (f": {tail[0]}" if tail else "")}]}
    data["replay"] = replay_command(argv, seed)
    return data


def _on_threads(argv, seeds, root, jobs):
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(lambda seed: run_seed(argv, seed, root, os.getcwd()), seeds)


def _on_dask(argv, seeds, root, address):
    """Seeds as Dask tasks; reports in completion order (a lost worker's seeds rerun
    elsewhere: each is collected from its one future)."""
    from distributed import as_completed
    from kvsim import on_dask
    try:
        client = on_dask.connect(address)
    except (OSError, TimeoutError) as e:
        raise LaunchError(f"--dask {address}: {e}") from None
    with client:
        futures = [client.submit(run_seed, argv, seed, root, os.getcwd(), pure=False)
                   for seed in seeds]
        for future in as_completed(futures):
            yield future.result()


def run_campaign(argv, seeds, jobs, output_dir, dask=None):
    """One launch per seed, `jobs` at a time (or on the Dask cluster at `dask`: an address or
    "local:N"), each with its own output directory; prints progress and the summary and writes
    fault_campaign.json. Returns 0 when every seed's faults were handled, 1 otherwise."""
    import tempfile
    root = os.path.abspath(output_dir or tempfile.mkdtemp(prefix="kvsim-faults-"))
    runs = _on_dask(argv, seeds, root, dask) if dask else _on_threads(argv, seeds, root, jobs)
    results = []
    for i, data in enumerate(runs):
        results.append(data)
        state = "UNHANDLED" if data["findings"] else "handled"
        print(f"kvsim launch: [{i + 1}/{len(seeds)}] seed {data['seed']}: {state}",
              file=sys.stderr, flush=True)
    results.sort(key=lambda r: seeds.index(r["seed"]))
    unhandled = [r for r in results if r["findings"]]
    lines = [f"kvsim launch: fault campaign: {len(seeds)} seeds, "
             f"{len(unhandled)} with an unhandled fault"]
    for r in unhandled:
        lines.append(f"  seed {r['seed']}: " + ("; ".join(x["describe"] for x in r["faults"])
                                                 or "no fault drawn"))
        for f in r["findings"]:
            who = f"{f['process']} " if f["process"] else ""
            lines.append(f"    {f['kind']}: {who}{f['detail']}")
        lines.append(f"    replay: {r['replay']}")
    path = os.path.join(root, "fault_campaign.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"seeds": len(seeds), "unhandled": len(unhandled), "results": results}, f,
                  indent=1)
    os.replace(tmp, path)
    lines.append(f"kvsim launch: per-seed outputs and fault_campaign.json in {root}")
    print("\n".join(lines), file=sys.stderr)
    return 1 if unhandled else 0


def _insert_before_commands(argv, words):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i] + words + argv[i:]
    return argv + words


def write_report(path, seed, faults, findings):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"seed": seed,
                   "faults": [dict(dataclasses.asdict(x), describe=x.describe()) for x in faults],
                   "findings": findings}, f)
    os.replace(tmp, path)
