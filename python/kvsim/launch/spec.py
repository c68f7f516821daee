"""What a launch runs: the world (preset, overrides, addresses) and its processes, from the
command line or a launch file. Every error names the option or the file, line and key."""
import dataclasses
import ipaddress
import math
import os
import shlex
from typing import Dict, List, Optional


class LaunchError(ValueError):
    """Bad usage or a bad launch file (the launcher exits with status 2)."""


@dataclasses.dataclass
class ProcessSpec:
    """One program of a launch."""
    name: str
    node: int
    argv: List[str]                       # the command as its user types it (python3 x.py ...)
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    cwd: Optional[str] = None


@dataclasses.dataclass
class LaunchSpec:
    """A whole launch."""
    preset: str = "atlas-a2"
    overrides: Dict[str, str] = dataclasses.field(default_factory=dict)
    nodes: Optional[int] = None           # default: one node per process
    host_ips: Optional[List[str]] = None  # per node
    device_ips: Dict[int, List[str]] = dataclasses.field(default_factory=dict)  # node -> ips
    processes: List[ProcessSpec] = dataclasses.field(default_factory=list)
    seed: int = 0
    timeout: float = 600.0                # wall-clock seconds
    wall_clock: bool = False
    output_dir: Optional[str] = None
    origin: str = "command line"
    fault_plan: Optional[object] = None   # faults.FaultPlan from the file's `faults` key
    fault_seed: Optional[int] = None      # --faults with one seed
    strict: bool = False                  # a broken API rule fails the launch (kvsim.launch.rules)
    schedule_seed: int = 0                # which ready thread runs next (0: the oldest)


def check_ipv4(text, where):
    """A dotted IPv4 address, or LaunchError naming `where`."""
    try:
        return str(ipaddress.IPv4Address(str(text).strip()))
    except ValueError:
        raise LaunchError(f"{where}: {text!r} is not an IPv4 address") from None


def consecutive(first, count, where):
    """`count` addresses from `first` on."""
    start = ipaddress.IPv4Address(check_ipv4(first, where))
    return [str(start + i) for i in range(count)]


def split_commands(words):
    """Commands separated by ':::' (each: NAME=VALUE assignments, then the program)."""
    commands, current = [], []
    for word in words:
        if word == ":::":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    if any(not c for c in commands):
        raise LaunchError("commands: an empty command (two ':::' in a row, or one at an end)")
    return commands


def split_env(command, where):
    """Leading NAME=VALUE words (as a shell's) and the rest."""
    env, i = {}, 0
    while i < len(command) and "=" in command[i] and command[i].split("=", 1)[0].isidentifier():
        name, value = command[i].split("=", 1)
        env[name] = value
        i += 1
    if i == len(command):
        raise LaunchError(f"{where}: no program after the environment assignments")
    return env, command[i:]


def from_commands(commands, names=None, nodes=None, **options):
    """A LaunchSpec from the command line's commands; process i runs on node i mod nodes."""
    if names is not None and len(names) != len(commands):
        raise LaunchError(f"--names: {len(names)} names for {len(commands)} commands")
    spec = LaunchSpec(nodes=nodes, **options)
    count = nodes if nodes is not None else len(commands)
    if count < 1:
        raise LaunchError(f"--nodes: {count} must be at least 1")
    for rank, command in enumerate(commands):
        env, argv = split_env(command, f"command {rank + 1}")
        name = names[rank] if names is not None else f"p{rank}"
        spec.processes.append(ProcessSpec(name, rank % count, argv, env))
    spec.nodes = count
    return spec


# --- launch files ------------------------------------------------------------------------------

class _Node:
    """A YAML node with its position, for messages that name file, line and key."""

    def __init__(self, node, path, key):
        self.node, self.path, self.key = node, path, key

    def where(self, key=None):
        line = self.node.start_mark.line + 1
        return f"{self.path}:{line}: {self.key if key is None else self.key + '.' + key}"

    def fail(self, why, key=None):
        raise LaunchError(f"{self.where(key)}: {why}")

    def kind(self):
        return type(self.node).__name__.replace("Node", "").lower()

    def mapping(self, allowed):
        if self.kind() != "mapping":
            self.fail(f"expected a mapping, got a {self.kind()}")
        out = {}
        for k, v in self.node.value:
            key = k.value
            child = _Node(v, self.path, f"{self.key}.{key}" if self.key else key)
            if key not in allowed:
                child.fail(f"unknown key (known: {', '.join(sorted(allowed))})")
            if key in out:
                child.fail("given twice")
            out[key] = child
        return out

    def sequence(self):
        if self.kind() != "sequence":
            self.fail(f"expected a list, got a {self.kind()}")
        return [_Node(v, self.path, f"{self.key}[{i}]") for i, v in enumerate(self.node.value)]

    def scalar(self):
        if self.kind() != "scalar":
            self.fail(f"expected a value, got a {self.kind()}")
        return self.node.value

    def text(self):
        return str(self.scalar())

    def integer(self, low=None, high=None):
        try:
            value = int(self.scalar())
        except ValueError:
            self.fail(f"{self.scalar()!r} is not an integer")
        if (low is not None and value < low) or (high is not None and value > high):
            self.fail(f"{value} is out of range [{low}, {high}]")
        return value

    def number(self, low=0.0):
        try:
            value = float(self.scalar())
        except ValueError:
            self.fail(f"{self.scalar()!r} is not a number")
        if not math.isfinite(value) or value < low:
            self.fail(f"{value} must be a finite number >= {low}")
        return value

    def boolean(self):
        text = self.text().lower()
        if text not in ("true", "false", "yes", "no", "1", "0"):
            self.fail(f"{self.text()!r} is not true or false")
        return text in ("true", "yes", "1")

    def words(self):
        """A command: a list of words, or a string split as a shell would."""
        if self.kind() == "sequence":
            return [item.text() for item in self.sequence()]
        try:
            return shlex.split(self.text())
        except ValueError as e:
            self.fail(f"cannot split the command: {e}")

    def addresses(self, count):
        """A list of `count` addresses, or the first of `count` consecutive ones."""
        if self.kind() == "sequence":
            items = [check_ipv4(item.text(), item.where()) for item in self.sequence()]
            if len(items) != count:
                self.fail(f"{len(items)} addresses for {count} devices")
            return items
        return consecutive(self.text(), count, self.where())


def load_file(path, devices_per_node):
    """A LaunchSpec from a launch file. `devices_per_node(preset, overrides)` tells how many
    device addresses a node takes."""
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            root = yaml.compose(f)
    except OSError as e:
        raise LaunchError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise LaunchError(f"{path}: {e}") from None
    if root is None:
        raise LaunchError(f"{path}: the file is empty")
    top = _Node(root, path, "").mapping(
        {"preset", "set", "nodes", "processes", "seed", "timeout", "wall_clock", "output_dir",
         "faults", "strict", "schedule_seed"})
    spec = LaunchSpec(origin=path)
    base = os.path.dirname(os.path.abspath(path))
    if "preset" in top:
        spec.preset = top["preset"].text()
    if "set" in top:
        for key, value in top["set"].mapping(_AnyKey()).items():
            spec.overrides[key] = value.text()
    if "seed" in top:
        spec.seed = top["seed"].integer(0, 2**63 - 1)
    if "timeout" in top:
        spec.timeout = top["timeout"].number(0.001)
    if "wall_clock" in top:
        spec.wall_clock = top["wall_clock"].boolean()
    if "strict" in top:
        spec.strict = top["strict"].boolean()
    if "schedule_seed" in top:
        spec.schedule_seed = top["schedule_seed"].integer(0, 2**63 - 1)
    if "output_dir" in top:
        spec.output_dir = os.path.join(base, top["output_dir"].text())
    if "faults" in top:
        from kvsim.launch.faults import plan_from_node
        spec.fault_plan = plan_from_node(top["faults"])
    if "processes" not in top:
        _Node(root, path, "").fail("required key 'processes' is missing")
    node_specs = top["nodes"].sequence() if "nodes" in top else []
    spec.nodes = len(node_specs) or None
    per_node = None
    hosts = []
    for i, item in enumerate(node_specs):
        fields = item.mapping({"host_ip", "device_ips"})
        if "host_ip" in fields:
            hosts.append(check_ipv4(fields["host_ip"].text(), fields["host_ip"].where()))
        if "device_ips" in fields:
            if per_node is None:
                overrides = dict(spec.overrides, nodes=str(len(node_specs)))
                per_node = devices_per_node(spec.preset, overrides)
            spec.device_ips[i] = fields["device_ips"].addresses(per_node)
    if hosts:
        if len(hosts) != len(node_specs):
            top["nodes"].fail("give host_ip for every node or for none")
        spec.host_ips = hosts
    names = set()
    for i, item in enumerate(top["processes"].sequence()):
        fields = item.mapping({"name", "node", "command", "env", "cwd"})
        if "command" not in fields:
            item.fail("required key 'command' is missing")
        name = fields["name"].text() if "name" in fields else f"p{i}"
        if name in names:
            fields["name"].fail(f"process name {name!r} is used twice")
        names.add(name)
        # Presets hold at most 254 nodes (model/preset.cpp).
        node = fields["node"].integer(0, 253) if "node" in fields else i
        if spec.nodes is not None and node >= spec.nodes:
            fields["node"].fail(f"node {node} is not one of the {spec.nodes} nodes listed")
        env = {k: v.text() for k, v in fields["env"].mapping(_AnyKey()).items()} \
            if "env" in fields else {}
        cwd = os.path.join(base, fields["cwd"].text()) if "cwd" in fields else base
        argv = fields["command"].words()
        if not argv:
            fields["command"].fail("the command is empty")
        spec.processes.append(ProcessSpec(name, node, argv, env, cwd))
    if not spec.processes:
        top["processes"].fail("no processes")
    if "faults" in top and "processes" in top["faults"].mapping(_AnyKey()):
        for item in top["faults"].mapping(_AnyKey())["processes"].sequence():
            if item.text() not in names:
                item.fail(f"no process named {item.text()!r} in the launch (its processes: "
                          f"{', '.join(p.name for p in spec.processes)})")
    if spec.nodes is None:
        spec.nodes = max(p.node for p in spec.processes) + 1
    return spec


class _AnyKey:
    """Accepts every key (free-form mappings: env, set)."""

    def __contains__(self, key):
        return True

    def __iter__(self):
        return iter(())
