"""kvsim launch: runs users' multi-process programs, unchanged, as simulated host processes of
one deterministic world.

    kvsim launch [options] -- python3 sample.py --role p ... ::: python3 sample.py --role d ...
    kvsim launch [options] -- ./prompt 0 10.0.0.1 ::: ./decoder 0 10.0.0.2 10.0.0.1
    kvsim launch [options] -f launch.yaml

Each command becomes a host process on a node of the world (process i on node i unless a launch
file says otherwise), runs in simulated time, and writes its output prefixed with its name.
Every command runs as an OS process that joins the world through libkvsim_preload
(cpp/server/launch_server.h): a C++ program linked with kvsim's libllm_datadist and libascendcl,
or a Python program, whose llm_datadist objects live in the launcher (kvsim.launch.python_calls)
and whose torch is Debian's with NPU tensors in simulated HBM (kvsim.launched). The exit status is the worst of the processes';
a launch in which every process waits for another ends with a report of who waits on what.
"""
import argparse
import ipaddress
import os
import shutil
import signal
import sys
import tempfile

from kvsim.launch import faults, netns, rules
from kvsim.launch.spec import LaunchError, LaunchSpec, check_ipv4, consecutive, from_commands, \
    load_file, split_commands

#: The exit status of a strict launch whose programs broke an API rule (kvsim.launch.rules).
RULES_BROKEN = 3
#: The exit status of a process that never ended (a stalled launch, or the wall-clock limit).
NOT_ENDED = 124
PID_BASE = 4000
_PYTHON_FLAGS_WITH_ARG = {"-W", "-X", "--check-hash-based-pycs"}


def is_python(argv):
    """True for a Python command line, False for any other program."""
    program = os.path.basename(argv[0])
    return program.endswith(".py") or program == "python" or program.startswith("python3")


def host_name(node):
    """The name a launched program's gethostname() gives on `node` (cpp/preload/name_calls.cpp)."""
    return f"node{node}"


def python_command(argv):
    """The command line of a Python program run as an OS process: with the launcher's own
    interpreter, which kvsim's modules (kvsim._core, and torch with them) are built for."""
    if os.path.basename(argv[0]).endswith(".py"):
        return [sys.executable] + list(argv)
    return [sys.executable] + list(argv[1:])


def python_environment(env, seed):
    """What a Python program run as an OS process needs in its environment: kvsim's packages and
    launched/site first on its path (site/sitecustomize.py joins it to the launch), a seeded
    hash (dict and set order replay), unbuffered output (its lines come out as it writes them)."""
    import kvsim
    from kvsim.hosting import torch_support
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(kvsim.__file__)))
    site = os.path.join(os.path.dirname(os.path.abspath(kvsim.__file__)), "launched", "site")
    path = [site] + torch_support.site_dirs() + [package_parent]
    env["PYTHONPATH"] = os.pathsep.join(path + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and p not in path])
    env["KVSIM_PYTHON_LAUNCHED"] = "1"
    env["PYTHONHASHSEED"] = str(seed % 4294967296)
    env.setdefault("PYTHONUNBUFFERED", "1")


def native_lib_dir():
    """The directory of libkvsim_preload.so and kvsim's C++ libraries: $KVSIM_LIB_DIR, else
    <prefix>/lib of an installed kvsim, else the build tree's."""
    from kvsim import _core
    candidates = []
    if os.environ.get("KVSIM_LIB_DIR"):
        candidates.append(os.environ["KVSIM_LIB_DIR"])
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(_core.__file__)))
    rel = os.path.normpath(_core.python_install_dir)
    if package_parent.endswith(os.sep + rel):
        candidates.append(os.path.join(package_parent[:-len(rel) - 1], "lib"))
    candidates.append(_core.native_build_dir)
    for directory in candidates:
        if os.path.exists(os.path.join(directory, "libkvsim_preload.so")):
            return directory
    raise LaunchError("libkvsim_preload.so not found in " + ", ".join(candidates) +
                      ": build kvsim's cpp targets, or set KVSIM_LIB_DIR")


def check_program(program, path, cwd, where):
    """LaunchError unless `program` names an executable file (as execvp finds it)."""
    if os.sep in program:
        found = os.path.join(cwd, program)
        ok = os.path.isfile(found) and os.access(found, os.X_OK)
    else:
        ok = shutil.which(program, path=path) is not None
    if not ok:
        raise LaunchError(f"{where}: {program!r} is not a program (no executable file of that "
                          f"name{' in PATH' if os.sep not in program else ''})")


def parse_python(argv, where):
    """(script, sys.argv) of a Python command line: script is ("path", file), ("module", name)
    or ("code", text)."""
    program = os.path.basename(argv[0])
    if program.endswith(".py"):
        return ("path", argv[0]), list(argv)
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in ("-m", "-c"):
            if i + 1 == len(argv):
                raise LaunchError(f"{where}: {word} needs an argument")
            if word == "-m":
                return ("module", argv[i + 1]), [argv[i + 1]] + argv[i + 2:]
            return ("code", argv[i + 1]), ["-c"] + argv[i + 2:]
        if word in _PYTHON_FLAGS_WITH_ARG:
            i += 2
            continue
        if word.startswith("-") and word != "-":
            i += 1
            continue
        return ("path", word), argv[i:]
    raise LaunchError(f"{where}: no script, -m or -c after {argv[0]} (an interactive Python "
                      "cannot be launched)")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="kvsim launch",
        description="Run programs written for llm_datadist (Python scripts, and C++ programs "
                    "linked with kvsim's libllm_datadist), unchanged, as simulated host "
                    "processes of one world. Commands follow '--', separated by ':::'; "
                    "NAME=VALUE words before a command set its environment.",
        epilog="example: kvsim launch --hosts 10.10.10.0,10.10.10.1 -- python3 sample.py "
               "--role p ::: python3 sample.py --role d")
    parser.add_argument("-f", "--file", help="a launch file (YAML) instead of commands")
    parser.add_argument("--preset", help="hardware preset (default atlas-a2)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="preset override, as kvsim run's --set hardware.KEY")
    parser.add_argument("--nodes", type=int, help="nodes in the world (default: one per command)")
    parser.add_argument("--hosts", help="host addresses of the nodes, comma-separated")
    parser.add_argument("--device-ips", action="append", default=[], metavar="NODE=FIRST",
                        help="node NODE's devices get FIRST and the addresses after it")
    parser.add_argument("--names", help="process names, comma-separated (default p0, p1, ...)")
    parser.add_argument("--seed", type=int, help="seed of the programs' random numbers (0)")
    parser.add_argument("--strict", action="store_true",
                        help="API rules are errors: every LLMDataDist runs with kvsim.Strict, and "
                             "a pair of calls that a rule forbids to overlap and that the "
                             "programs do not order fails the launch (exit status 3)")
    parser.add_argument("--schedule-seed", type=int, metavar="N",
                        help="seed of the order in which a process's ready threads run (0: "
                             "oldest first); the rule verdict must not depend on it")
    parser.add_argument("--timeout", type=float, help="wall-clock limit in seconds (600)")
    parser.add_argument("--wall-clock", action="store_true",
                        help="programs' clocks read the host's real time (sleeps stay simulated)")
    parser.add_argument("--output-dir", help="also write each process's output to DIR/NAME.out/.err")
    parser.add_argument("--faults", metavar="SEEDS",
                        help="inject faults (links, process kills, device out of memory) drawn "
                             "from each seed (7, 1-20 or 1,4,9) and "
                             "report what the programs did not handle; several seeds run as a "
                             "campaign, one launch per seed")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="launches of a fault campaign run at once (default: the CPUs)")
    parser.add_argument("--dask", metavar="ADDRESS",
                        help="run a fault campaign's launches on a Dask cluster: a scheduler "
                             "address (tcp://host:8786) or local:N")
    parser.add_argument("--fault-report", metavar="FILE",
                        help="write this launch's faults and findings as JSON (campaigns use it)")
    parser.add_argument("commands", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    words = args.commands[1:] if args.commands[:1] == ["--"] else args.commands
    if args.file and words:
        raise LaunchError("give commands or --file, not both")
    if not args.file and not words:
        raise LaunchError("no commands: kvsim launch [options] -- python3 x.py ... ::: ...")
    return args, words


def build_spec(args, words):
    if args.file:
        spec = load_file(args.file, _devices_per_node)
        if args.nodes is not None or args.names or args.hosts or args.device_ips:
            raise LaunchError("--nodes, --names, --hosts and --device-ips belong in the launch "
                              "file when --file is given")
    else:
        names = args.names.split(",") if args.names else None
        spec = from_commands(split_commands(words), names=names, nodes=args.nodes)
    if args.preset:
        spec.preset = args.preset
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LaunchError(f"--set {item!r}: expected KEY=VALUE")
        spec.overrides[key.removeprefix("hardware.")] = value
    if args.seed is not None:
        spec.seed = args.seed
    if args.timeout is not None:
        if args.timeout <= 0:
            raise LaunchError(f"--timeout {args.timeout}: must be > 0 seconds")
        spec.timeout = args.timeout
    if args.wall_clock:
        spec.wall_clock = True
    if args.strict:
        spec.strict = True
    if args.schedule_seed is not None:
        if args.schedule_seed < 0:
            raise LaunchError(f"--schedule-seed {args.schedule_seed}: must be >= 0")
        spec.schedule_seed = args.schedule_seed
    if args.output_dir:
        spec.output_dir = args.output_dir
    if args.jobs < 1:
        raise LaunchError(f"--jobs {args.jobs}: must be at least 1")
    if args.fault_report and not args.faults:
        raise LaunchError("--fault-report needs --faults")
    if args.hosts:
        hosts = [check_ipv4(h, "--hosts") for h in args.hosts.split(",")]
        if len(hosts) != spec.nodes:
            raise LaunchError(f"--hosts: {len(hosts)} addresses for {spec.nodes} nodes")
        spec.host_ips = hosts
    per_node = None
    for item in args.device_ips:
        node, sep, first = item.partition("=")
        if not sep or not node.isdigit() or int(node) >= spec.nodes:
            raise LaunchError(f"--device-ips {item!r}: expected NODE=FIRST_IP with NODE in "
                              f"[0, {spec.nodes})")
        if per_node is None:
            per_node = _devices_per_node(spec.preset, dict(spec.overrides, nodes=str(spec.nodes)))
        spec.device_ips[int(node)] = consecutive(first, per_node, "--device-ips")
    return spec


def _devices_per_node(preset, overrides):
    import kvsim
    probe = kvsim.World(preset, overrides)
    return probe.device_count // probe.nodes


def make_world(spec):
    """The world of a launch: the preset with its overrides and the launch's addresses."""
    import kvsim
    overrides = dict(spec.overrides, nodes=str(spec.nodes))
    probe = kvsim.World(spec.preset, overrides)
    per_node = probe.device_count // probe.nodes
    hosts = spec.host_ips or [probe.host_ip(n) for n in range(spec.nodes)]
    # Nodes without --device-ips get the preset's addresses, moved past any address the launch
    # names itself: hosts on 10.0.0.x are common and atlas-a2's devices default to 10.0.0.(d+1).
    taken = {ipaddress.IPv4Address(a) for a in hosts}
    taken.update(ipaddress.IPv4Address(a) for ips in spec.device_ips.values() for a in ips)
    devices = []
    cursor = ipaddress.IPv4Address(probe.device_ip(0))
    for node in range(spec.nodes):
        if node in spec.device_ips:
            devices += spec.device_ips[node]
            continue
        cursor = max(cursor, ipaddress.IPv4Address(probe.device_ip(node * per_node)))
        for _ in range(per_node):
            while cursor in taken:
                cursor += 1
            devices.append(str(cursor))
            taken.add(cursor)
            cursor += 1
    try:
        world = kvsim.World(spec.preset, overrides, host_ips=hosts, device_ips=devices)
    except ValueError as e:
        if "is used twice" not in str(e):
            raise
        raise LaunchError(f"{e}: the addresses given by --hosts and --device-ips (or the launch "
                          "file's host_ip and device_ips) must all differ") from None
    return world, per_node


def visible_devices(proc, node_devices):
    """World devices the process sees: ASCEND_RT_VISIBLE_DEVICES (physical ids of its node) or
    all of its node's."""
    text = proc.env.get("ASCEND_RT_VISIBLE_DEVICES", os.environ.get("ASCEND_RT_VISIBLE_DEVICES"))
    if text is None or text.strip() == "":
        return list(node_devices)
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= len(node_devices):
            raise LaunchError(f"process {proc.name}: ASCEND_RT_VISIBLE_DEVICES={text!r}: "
                              f"{item!r} is not a device of its node (0..{len(node_devices) - 1})")
        out.append(node_devices[int(item)])
    return out


class Launch:
    """One launch: its world, its server and the programs it runs."""

    def __init__(self, spec, argv=(), fault_report=None):
        self.spec = spec
        self.argv = list(argv)
        self.fault_report = fault_report
        self.expired = False
        self.server = None
        self.programs = []
        self.faults = []
        self._temp_dirs = []  # made by this launch for itself; removed when it ends

    def run(self):
        """Runs the launch to its end; returns the exit code kvsim launch exits with."""
        try:
            return self._run()
        finally:
            for path in self._temp_dirs:
                shutil.rmtree(path, ignore_errors=True)

    def _run(self):
        from kvsim import _core
        from kvsim.hosting import ascend_env, torch_support
        spec = self.spec
        world, per_node = make_world(spec)
        self.world = world
        self.faults = []
        if spec.fault_seed is not None:
            plan = spec.fault_plan or faults.FaultPlan()
            nodes = [ps.node for ps in spec.processes]
            candidates = faults.targets(world, nodes, plan.scope)
            names = [ps.name for ps in spec.processes]
            self.faults = faults.draw(plan, spec.fault_seed, candidates, names,
                                      faults.device_targets(world, nodes, plan.scope))
            if not plan.during:
                faults.inject(world, self.faults, world.now_ps * 1e-12)
            if not spec.output_dir:  # the verdict reads each process's last error line
                spec.output_dir = tempfile.mkdtemp(prefix="kvsim-faults-out-")
                self._temp_dirs.append(spec.output_dir)
        addresses = [world.host_ip(n) for n in range(spec.nodes)] + \
            [world.device_ip(d) for d in range(world.device_count)]
        if netns.inside():
            netns.configure(addresses)
        python_calls = None
        if any(is_python(ps.argv) for ps in spec.processes):
            from kvsim.launch.python_calls import PythonCalls
            python_calls = PythonCalls(world, strict=spec.strict)
        if spec.output_dir:
            os.makedirs(spec.output_dir, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="kvsim-launch-")  # mode 0700: node descriptions
        self._temp_dirs.append(scratch)
        lib_dir = native_lib_dir()
        server = _core.LaunchServer(world, spec.output_dir or "", spec.timeout, python_calls,
                                    spec.schedule_seed)
        self.server = server
        self.programs = []  # (rank, name, node) of the OS processes
        for rank, ps in enumerate(spec.processes):
            where = f"process {ps.name}"
            if not 0 <= ps.node < spec.nodes:
                raise LaunchError(f"{where}: node {ps.node} is not in [0, {spec.nodes})")
            node_devices = list(range(ps.node * per_node, (ps.node + 1) * per_node))
            seen = visible_devices(ps, node_devices)
            node_file = os.path.join(scratch, f"node{ps.node}.json")
            if not os.path.exists(node_file):
                ascend_env.write_node_info(
                    node_file, world.host_ip(ps.node),
                    [{"phy_id": i, "ip": world.device_ip(d)} for i, d in enumerate(node_devices)])
            env = dict(os.environ)
            env.pop(netns.READY, None)
            env.update(ps.env)
            env["PATH"] = torch_support.bin_dir() + os.pathsep + env.get("PATH", "")
            env["KVSIM_NODE_INFO"] = node_file
            argv = list(ps.argv)
            if is_python(argv):
                parse_python(argv, where)
                argv = python_command(argv)
                python_environment(env, spec.seed + rank)
            check_program(argv[0], env.get("PATH", ""), ps.cwd or os.getcwd(), where)
            sim_id = world.add_process(ps.name, ps.node, seen)
            if python_calls is not None:
                python_calls.ranks[sim_id] = rank
            for name in ("KVSIM_WORLD_SOCKET", "KVSIM_PROCESS_TOKEN"):
                env.pop(name, None)
            preload = os.path.join(lib_dir, "libkvsim_preload.so")
            env["LD_PRELOAD"] = " ".join(filter(None, [preload, env.get("LD_PRELOAD")]))
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                filter(None, [lib_dir, env.get("LD_LIBRARY_PATH")]))
            if spec.wall_clock:
                env["KVSIM_WALL_CLOCK"] = "1"
            env["KVSIM_RANDOM_SEED"] = str((spec.seed * 1000003 + rank) % 2**64)
            env["KVSIM_PID"] = str(PID_BASE + rank)
            env["KVSIM_HOSTNAME"] = host_name(ps.node)
            env["KVSIM_HOSTS"] = ",".join(f"{host_name(n)}={world.host_ip(n)}"
                                          for n in range(spec.nodes))
            env["GLIBC_TUNABLES"] = netns.malloc_tunables(env.get("GLIBC_TUNABLES"))
            server.add(ps.name, sim_id, argv, [f"{k}={v}" for k, v in env.items()],
                       ps.cwd or os.getcwd())
            self.programs.append((rank, ps.name, ps.node))
        if self.faults and self.faults[0].trigger:
            server.set_call_hook(self._trigger)
        else:
            self._schedule_kills(world.now_ps)
        old = signal.signal(signal.SIGALRM, self._expire)
        signal.setitimer(signal.ITIMER_REAL, spec.timeout)
        try:
            server.run()
        finally:
            # The hook refers back to this launch, which holds the server: a cycle through C++
            # that Python's collector cannot see would keep the server, and its socket folder.
            server.set_call_hook(None)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            report = self._report()
        sys.stderr.write(report)
        launched = {name for _, name, _ in self.programs}  # children are their parents' to judge
        codes = [NOT_ENDED if e["exit_code"] is None else e["exit_code"]
                 for e in server.ends() if e["name"] in launched
                 if not faults.killed_by(self.faults, e["name"], e["exit_code"])]
        if self._rule_verdict(python_calls) and spec.strict:
            codes.append(RULES_BROKEN)
        if spec.fault_seed is not None and self._fault_verdict():
            return max(codes + [1])
        return max(codes, default=0)

    def _rule_verdict(self, python_calls):
        """Prints (and writes to OUTPUT_DIR/rules.json) the API rules the programs broke."""
        found = python_calls.rules.findings() if python_calls is not None else []
        lines = [line for f in found for line in f.lines()]
        if found:
            lines.append(f"kvsim launch: {len(found)} API rule finding(s)"
                         + ("" if self.spec.strict else " (warnings: --strict makes them fail "
                                                         "the launch)"))
            sys.stderr.write("\n".join(lines) + "\n")
        if self.spec.output_dir:
            rules.write_report(os.path.join(self.spec.output_dir, "rules.json"), found)
        return found

    def _trigger(self, program, call):
        """The call hook of a plan with `during`: at the first such call of any program, the
        seed's faults start, their times counted from now (and then shown as absolute)."""
        if call != self.faults[0].trigger or getattr(self, "_fired", False):
            return
        self._fired = True
        start = self.world.now_ps * 1e-12
        for f in self.faults:
            f.at += start
            f.until += start
        faults.inject(self.world, self.faults, 0.0)
        self._schedule_kills(0)

    def _schedule_kills(self, start_ps):
        """The seed's process kills: the server kills the program (SIGKILL) at that time."""
        for f in self.faults:
            name = faults.victim(f)
            if name is not None:
                self.server.kill_at(name, start_ps + round(f.at * 1e12))

    def _fault_verdict(self):
        """Prints (and writes, with --fault-report) what the programs did not handle."""
        spec = self.spec
        launched = {name for _, name, _ in self.programs}
        ends = [(e["name"], e["exit_code"]) for e in self.server.ends() if e["name"] in launched]
        ends = [(name, code, faults.last_error_line(os.path.join(spec.output_dir, name + ".err"))
                 if code else "") for name, code in ends]
        jobs = [f"{j['job']} ({j['what']})" for j in self.world.blocked_jobs()]
        findings = faults.verdict(ends, self.world.inventory(), self.faults, jobs)
        replay = faults.replay_command(self.argv, spec.fault_seed)
        if self.faults and self.faults[0].trigger and not getattr(self, "_fired", False):
            sys.stderr.write(f"kvsim launch: seed {spec.fault_seed}: no program made a "
                             f"{self.faults[0].trigger} call, so its faults never started\n")
        sys.stderr.write("\n".join(faults.report_lines(spec.fault_seed, self.faults, findings,
                                                        replay)) + "\n")
        if self.fault_report:
            faults.write_report(self.fault_report, spec.fault_seed, self.faults, findings)
        return findings

    def _expire(self, signum, frame):
        self.expired = True
        self.world.request_stop()

    def _report(self):
        lines = []
        stall = self.server.stall_report()
        if stall:
            lines.append(f"kvsim launch: {stall.splitlines()[0]}")
            lines += stall.splitlines()[1:]
        ends = {e["name"]: e for e in self.server.ends()}
        for _, name, node in sorted(self.programs):
            code, ended_ps = ends[name]["exit_code"], ends[name]["ended_ps"]
            status = ("did not end" if code is None else
                      f"was killed by the fault at t={ended_ps * 1e-12:.6f} s"
                      if faults.killed_by(self.faults, name, code) else
                      f"exited {code} at t={ended_ps * 1e-12:.6f} s")
            lines.append(f"kvsim launch: {name} (node {node}) {status}")
        return "\n".join(lines) + "\n"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, words = parse_args(argv)
        spec = build_spec(args, words)
        if args.faults is not None:
            seeds = faults.parse_seeds(args.faults)
            if len(seeds) > 1:
                return faults.run_campaign(argv, seeds, args.jobs, spec.output_dir, args.dask)
            spec.fault_seed = seeds[0]
        if args.dask:
            raise LaunchError("--dask runs a fault campaign: give --faults more than one seed")
        if not netns.inside():
            netns.reexec_inside(argv)
        return Launch(spec, argv, args.fault_report).run()
    except (LaunchError, netns.NamespaceError) as e:
        print(f"kvsim launch: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # a world the preset, overrides or addresses cannot make
        print(f"kvsim launch: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a program that cannot start
        print(f"{e}", file=sys.stderr)
        return 2
