"""The launch's own network namespace: loopback only, with the simulated hosts' and devices'
addresses on it, so that nothing a launched program sends can leave this machine, even where
kvsim's interception of its calls misses one (DEVELOPERS.md, Standards)."""
import os
import shutil
import socket
import subprocess
import sys

#: Set in the environment of the launcher once it runs inside its namespace.
READY = "KVSIM_LAUNCH_NETNS"


class NamespaceError(RuntimeError):
    """The launch cannot get an isolated network namespace."""


def unshare_command():
    """unshare with a new network namespace (and, for a non-root user, a user namespace)."""
    if shutil.which("unshare") is None:
        raise NamespaceError("kvsim launch needs unshare (util-linux) to isolate the network of "
                             "the programs it runs")
    command = ["unshare", "--net"]
    if os.geteuid() != 0:
        command.append("--map-root-user")
    return command


def reexec_inside(argv):
    """Runs this launcher again inside a fresh network namespace (does not return). The child
    also gets a fixed PYTHONHASHSEED, so that programs iterating over sets replay alike."""
    command = unshare_command()
    probe = subprocess.run(command + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise NamespaceError("kvsim launch cannot make a network namespace "
                             f"({' '.join(command)}: {probe.stderr.strip() or probe.returncode}); "
                             "run it as root, or enable unprivileged user namespaces")
    env = dict(os.environ)
    env[READY] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    env["GLIBC_TUNABLES"] = malloc_tunables(env.get("GLIBC_TUNABLES"))
    os.execvpe(command[0], command + ["--", sys.executable, "-m", "kvsim.launch"] + argv, env)


#: glibc malloc settings of the launcher and its C++ programs: buffers up to 32 MiB (a program's
#: aclrtMemcpy pieces, their frames, HBM extents) come from the heap and stay there when freed,
#: instead of being mapped and faulted in afresh each time (16x faster 16 MiB copies here).
MALLOC_TUNABLES = {"glibc.malloc.mmap_threshold": "33554432",
                   "glibc.malloc.trim_threshold": "536870912"}


def malloc_tunables(existing):
    """GLIBC_TUNABLES with MALLOC_TUNABLES added, the user's own settings kept and preferred."""
    items = [item for item in (existing or "").split(":") if item]
    given = {item.split("=", 1)[0] for item in items}
    items += [f"{k}={v}" for k, v in MALLOC_TUNABLES.items() if k not in given]
    return ":".join(items)


def inside():
    return os.environ.get(READY) == "1"


def configure(addresses):
    """Brings loopback up with `addresses` on it, and checks that it is the only interface."""
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        raise NamespaceError(f"kvsim launch: the network namespace has interfaces {names}, not "
                             "loopback alone; refusing to run programs that carry real addresses")
    _ip(["link", "set", "lo", "up"])
    for address in sorted(set(addresses)):
        if not address.startswith("127."):
            _ip(["addr", "add", f"{address}/32", "dev", "lo"])


def _ip(args):
    if shutil.which("ip") is None:
        raise NamespaceError("kvsim launch needs ip (iproute2) to set up its loopback addresses")
    done = subprocess.run(["ip"] + args, capture_output=True, text=True)
    if done.returncode != 0:
        raise NamespaceError(f"ip {' '.join(args)}: {done.stderr.strip()}")
