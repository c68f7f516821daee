"""The Ascend host environment of hosted processes.

- Device nodes: ``install_dev_patches()`` makes ``/dev/davinci<N>`` (N = physical ids of the
  running process's node, kvsim.hosting.context.current().node_devices) and
  ``/dev/davinci_manager`` visible to os.listdir, os.scandir, os.stat, os.lstat and
  os.path.exists. Outside a process context (current() is None) and for every other path these
  behave exactly as before.
- Node description: ``write_node_info`` writes the JSON that hccn_tool and npu-smi (bin/) read
  from the file named by $KVSIM_NODE_INFO::

    {"host_ip": "192.168.0.1", "chip": "910B3", "driver_version": "24.1.0",
     "devices": [{"phy_id": 0, "ip": "10.0.0.1", "netmask": "255.255.255.0",
                  "hbm_mb": 65536}, ...]}

  Optional per device: "hbm_used_mb", "bus_id", "health", "link" ("UP"), "power_w", "temp_c".
"""
import json
import os
import stat

from kvsim.hosting import context

_DEV = "/dev"
_DAVINCI_MAJOR = 236  # char devices of the Ascend driver; any major works for scripts
_originals = {}


def device_node_names(ctx=None):
    """Names under /dev the process sees for its node's NPUs ([] outside a process)."""
    ctx = context.current() if ctx is None else ctx
    if ctx is None:
        return []
    return [f"davinci{i}" for i in range(len(ctx.node_devices))] + ["davinci_manager"]


def _virtual_name(path):
    """The /dev name `path` refers to if it is a simulated device node, else None."""
    if context.current() is None or isinstance(path, int):
        return None
    try:
        p = os.fspath(path)
    except TypeError:
        return None
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    full = os.path.normpath(os.path.join(_originals["getcwd"](), p))
    head, name = os.path.split(full)
    if head != _DEV or name not in device_node_names():
        return None
    return name


def _fake_stat(name):
    names = device_node_names()
    minor = names.index(name)
    minor = 255 if name == "davinci_manager" else minor
    return os.stat_result((stat.S_IFCHR | 0o660, 0x4156_0000 + minor, 5, 1, 0, 0, 0, 0, 0, 0),
                          {"st_rdev": os.makedev(_DAVINCI_MAJOR, minor)})


def _is_dev_dir(path):
    if context.current() is None or isinstance(path, int):
        return False
    try:
        p = os.fsdecode(os.fspath("." if path is None else path))
    except TypeError:
        return False
    return os.path.normpath(os.path.join(_originals["getcwd"](), p)) == _DEV


class _DirEntry:
    """os.DirEntry of a simulated device node."""

    def __init__(self, directory, name, as_bytes):
        self._st = _fake_stat(name)
        path = os.path.join(directory, name)
        self.name = os.fsencode(name) if as_bytes else name
        self.path = os.fsencode(path) if as_bytes else path

    def inode(self):
        return self._st.st_ino

    def is_dir(self, *, follow_symlinks=True):
        return False

    def is_file(self, *, follow_symlinks=True):
        return False

    def is_symlink(self):
        return False

    def is_junction(self):
        return False

    def stat(self, *, follow_symlinks=True):
        return self._st

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"<DirEntry {self.name!r}>"


class _ScandirIterator:
    """The real scandir iterator followed by the simulated nodes it lacks."""

    def __init__(self, real, directory, as_bytes):
        self._real = real
        self._directory = directory
        self._as_bytes = as_bytes
        self._seen = set()
        self._extra = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._extra is None:
            try:
                entry = next(self._real)
                self._seen.add(os.fsdecode(entry.name))
                return entry
            except StopIteration:
                self._extra = iter([n for n in device_node_names() if n not in self._seen])
        return _DirEntry(self._directory, next(self._extra), self._as_bytes)

    def close(self):
        self._real.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _listdir(path="."):
    names = _originals["listdir"](path)
    if not _is_dev_dir(path):
        return names
    as_bytes = isinstance(path, bytes)
    present = {os.fsdecode(n) for n in names}
    extra = [n for n in device_node_names() if n not in present]
    return names + [os.fsencode(n) if as_bytes else n for n in extra]


def _scandir(path="."):
    real = _originals["scandir"](path)
    if not _is_dev_dir(path):
        return real
    p = os.fspath("." if path is None else path)
    return _ScandirIterator(real, os.fsdecode(p), isinstance(p, bytes))


def _stat(path, *, dir_fd=None, follow_symlinks=True):
    name = _virtual_name(path) if dir_fd is None else None
    if name is not None:
        return _fake_stat(name)
    return _originals["stat"](path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)


def _lstat(path, *, dir_fd=None):
    name = _virtual_name(path) if dir_fd is None else None
    if name is not None:
        return _fake_stat(name)
    return _originals["lstat"](path, dir_fd=dir_fd)


def _exists(path):
    if _virtual_name(path) is not None:
        return True
    return _originals["exists"](path)


def install_dev_patches():
    """Patch os so the running process sees its node's /dev/davinci* (idempotent)."""
    if _originals:
        return
    _originals.update(listdir=os.listdir, scandir=os.scandir, stat=os.stat, lstat=os.lstat,
                      exists=os.path.exists, getcwd=os.getcwd)
    os.listdir, os.scandir, os.stat, os.lstat = _listdir, _scandir, _stat, _lstat
    os.path.exists = _exists


def uninstall_dev_patches():
    """Restore the os functions install_dev_patches replaced."""
    if not _originals:
        return
    os.listdir, os.scandir = _originals["listdir"], _originals["scandir"]
    os.stat, os.lstat = _originals["stat"], _originals["lstat"]
    os.path.exists = _originals["exists"]
    _originals.clear()


def write_node_info(path, host_ip, devices, chip="910B3", driver_version="24.1.0"):
    """Write the node description hccn_tool and npu-smi read (see the module doc).

    devices: dicts with at least "phy_id" and "ip"; "netmask" defaults to 255.255.255.0 and
    "hbm_mb" to 65536.
    """
    out = []
    for d in devices:
        if "phy_id" not in d or "ip" not in d:
            raise ValueError(f"devices: {d!r} needs 'phy_id' and 'ip'")
        entry = {"phy_id": int(d["phy_id"]), "ip": str(d["ip"]),
                 "netmask": str(d.get("netmask", "255.255.255.0")),
                 "hbm_mb": int(d.get("hbm_mb", 65536))}
        entry.update({k: v for k, v in d.items() if k not in entry})
        out.append(entry)
    ids = [d["phy_id"] for d in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"devices: phy_id repeated in {ids}")
    info = {"host_ip": str(host_ip), "chip": str(chip), "driver_version": str(driver_version),
            "devices": out}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    return info


def node_info_for(ctx):
    """write_node_info's arguments for a process's node in the current world."""
    import kvsim
    from kvsim.hosting import npu
    world = kvsim.current_world()
    capacity = npu._preset_hbm_capacity(world.preset)
    hbm_mb = capacity // (1 << 20) if capacity else 65536
    name = npu.soc_name(world.preset)
    devices = [{"phy_id": i, "ip": world.device_ip(d), "hbm_mb": hbm_mb}
               for i, d in enumerate(ctx.node_devices)]
    return {"host_ip": ctx.host_ip, "devices": devices,
            "chip": name[len("Ascend"):] if name.startswith("Ascend") else name}
