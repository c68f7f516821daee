"""Ascend host tools (hccn_tool, npu-smi) as real subprocesses, the node-info file they read,
and the /dev/davinci* view of hosted processes (kvsim.hosting.ascend_env)."""
import glob
import json
import os
import stat
import subprocess

import pytest

import kvsim
from kvsim.hosting import ascend_env, context, torch_support

BIN = torch_support.bin_dir()


def run(tool, *args, node_info=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # no PYTHONPATH: no kvsim
    if node_info is not None:
        env["KVSIM_NODE_INFO"] = str(node_info)
    return subprocess.run([os.path.join(BIN, tool), *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.fixture
def node_file(tmp_path):
    path = tmp_path / "node.json"
    devices = [{"phy_id": i, "ip": f"10.0.0.{i + 9}"} for i in range(8)]
    devices[3]["hbm_used_mb"] = 3338
    ascend_env.write_node_info(path, host_ip="192.168.0.2", devices=devices)
    return path


def test_tools_are_standalone_python_scripts():
    for tool in ("hccn_tool", "npu-smi"):
        path = os.path.join(BIN, tool)
        assert os.access(path, os.X_OK)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert text.startswith("#!/usr/bin/env python3\n")
        assert "kvsim" not in "".join(line for line in text.splitlines()
                                      if line.lstrip().startswith(("import", "from")))


def test_write_node_info_format(node_file):
    info = json.loads(node_file.read_text())
    assert info["host_ip"] == "192.168.0.2" and info["chip"] == "910B3"
    assert info["devices"][0] == {"phy_id": 0, "ip": "10.0.0.9", "netmask": "255.255.255.0",
                                  "hbm_mb": 65536}
    assert info["devices"][3]["hbm_used_mb"] == 3338
    with pytest.raises(ValueError, match="phy_id repeated"):
        ascend_env.write_node_info(node_file, "h", [{"phy_id": 0, "ip": "a"}] * 2)
    with pytest.raises(ValueError, match="needs 'phy_id' and 'ip'"):
        ascend_env.write_node_info(node_file, "h", [{"phy_id": 0}])


def test_hccn_tool_ip_and_link(node_file):
    r = run("hccn_tool", "-i", "5", "-ip", "-g", node_info=node_file)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ipaddr:10.0.0.14\nnetmask:255.255.255.0\n",
                                                  "")
    r = run("hccn_tool", "-i", "0", "-link", "-g", node_info=node_file)
    assert (r.returncode, r.stdout) == (0, "link status: UP\n")
    r = run("hccn_tool", "-i", "2", "-net_health", "-g", node_info=node_file)
    assert (r.returncode, r.stdout) == (0, "net health status: Success\n")


def test_hccn_tool_errors(node_file):
    r = run("hccn_tool", "-i", "8", "-ip", "-g", node_info=node_file)
    assert r.returncode != 0 and r.stdout == "" and "device id 8 is invalid" in r.stderr
    r = run("hccn_tool", "-i", "0", "-lldp", "-g", node_info=node_file)
    assert r.returncode == 1 and "not simulated by kvsim" in r.stderr
    r = run("hccn_tool", "-i", "0", "-ip", "-g")
    assert r.returncode == 1 and "KVSIM_NODE_INFO is not set" in r.stderr


def test_npu_smi_info_table(node_file):
    r = run("npu-smi", "info", node_info=node_file)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert all(len(line) == 98 for line in lines)
    assert lines[1].startswith("| npu-smi 24.1.0                   Version: 24.1.0 ")
    assert lines[3] == ("| NPU   Name                | Health        | Power(W)    Temp(C)      "
                        "     Hugepages-Usage(page)|")
    assert lines[6] == ("| 0     910B3               | OK            | NA          NA           "
                        "     0    / 0             |")
    assert lines[7] == ("| 0                         | 0000:01:00.0  | 0           0    / 0     "
                        "     0    / 65536         |")
    assert lines[6 + 3 * 3 + 1] == ("| 0                         | 0000:04:00.0  | 0           0 "
                                    "   / 0          3338 / 65536         |")
    # What scripts parse: one "| <id>     <name>" row and one HBM pair per device.
    ids = [line.split()[1] for line in lines if line.startswith("| ") and
           line.split()[1].isdigit() and "910B3" in line]
    assert ids == [str(i) for i in range(8)]
    assert sum("No running processes found in NPU" in line for line in lines) == 8


def test_npu_smi_list_and_errors(node_file):
    r = run("npu-smi", "info", "-l", node_info=node_file)
    assert r.returncode == 0
    assert r.stdout.startswith("\tTotal Count                    : 8\n\n"
                               "\tNPU ID                         : 0\n"
                               "\tChip Count                     : 1\n\n")
    assert r.stdout.count("NPU ID") == 8
    r = run("npu-smi", "info", "-t", "board", "-i", "0", node_info=node_file)
    assert r.returncode == 1 and "not simulated by kvsim" in r.stderr
    assert run("npu-smi", "info").returncode == 1


@pytest.fixture
def dev_patches():
    ascend_env.install_dev_patches()
    yield
    context._active = None
    ascend_env.uninstall_dev_patches()


def activate(node):
    context._active = context.ProcessContext(
        name="p", rank=0, node=node, visible_devices=[8 * node], host_ip="192.168.0.1",
        node_devices=list(range(8 * node, 8 * node + 8)), pid=4242)


NODES = [f"davinci{i}" for i in range(8)] + ["davinci_manager"]


def test_dev_nodes_outside_a_process_are_untouched(dev_patches):
    real_listdir = ascend_env._originals["listdir"]
    assert os.listdir("/dev") == real_listdir("/dev")
    assert not any(n.startswith("davinci") for n in os.listdir("/dev"))
    assert not os.path.exists("/dev/davinci0") and os.path.exists("/dev/null")
    with pytest.raises(FileNotFoundError):
        os.stat("/dev/davinci0")
    assert [e.name for e in os.scandir("/dev")] == real_listdir("/dev")


def test_dev_nodes_of_a_process(dev_patches):
    activate(1)
    names = os.listdir("/dev")
    assert [n for n in names if n.startswith("davinci")] == NODES and "null" in names
    assert os.listdir(b"/dev")[-9:] == [n.encode() for n in NODES]
    assert os.path.exists("/dev/davinci7") and os.path.exists("/dev/davinci_manager")
    assert not os.path.exists("/dev/davinci8")
    st = os.stat("/dev/davinci3")
    assert stat.S_ISCHR(st.st_mode) and os.minor(st.st_rdev) == 3
    assert stat.S_ISCHR(os.lstat("/dev/davinci_manager").st_mode)
    with pytest.raises(FileNotFoundError):
        os.stat("/dev/davinci8")
    with os.scandir("/dev") as it:
        entries = {e.name: e for e in it}
    assert set(NODES) <= set(entries) and "null" in entries
    e = entries["davinci0"]
    assert e.path == "/dev/davinci0" and not e.is_dir() and not e.is_file()
    assert stat.S_ISCHR(e.stat().st_mode)
    assert sorted(glob.glob("/dev/davinci[0-9]*")) == [f"/dev/davinci{i}" for i in range(8)]
    assert os.path.exists("/dev/../dev/davinci2")
    cwd = os.getcwd()
    os.chdir("/dev")
    try:
        assert os.path.exists("davinci4") and "davinci4" in os.listdir()
    finally:
        os.chdir(cwd)
    assert os.path.exists("/dev/null") and not os.path.exists("/no/such/davinci0")
    context._active = None
    assert not os.path.exists("/dev/davinci0")


def test_uninstall_restores_os(dev_patches):
    originals = dict(ascend_env._originals)
    ascend_env.uninstall_dev_patches()
    assert os.listdir is originals["listdir"] and os.stat is originals["stat"]
    assert os.path.exists is originals["exists"] and os.scandir is originals["scandir"]
    activate(0)
    assert not os.path.exists("/dev/davinci0")


def test_node_info_for_a_process(world, tmp_path):
    ctx = context.ProcessContext(name="d", rank=1, node=1, visible_devices=[8, 9],
                                 node_devices=list(range(8, 16)), host_ip="192.168.0.2", pid=7)
    info = ascend_env.node_info_for(ctx)
    assert info["host_ip"] == "192.168.0.2" and info["chip"] == "910B3"
    assert [d["ip"] for d in info["devices"]] == [kvsim.device_ip(d) for d in range(8, 16)]
    assert info["devices"][0] == {"phy_id": 0, "ip": "10.0.0.9", "hbm_mb": 65536}
    path = tmp_path / "n.json"
    ascend_env.write_node_info(path, **info)
    r = run("hccn_tool", "-i", "1", "-ip", "-g", node_info=path)
    assert r.stdout == "ipaddr:10.0.0.10\nnetmask:255.255.255.0\n"
