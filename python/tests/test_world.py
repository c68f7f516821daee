"""World selection, replacement rules and simulated memory access."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kvsim
from llm_datadist import (CacheDesc, CacheKeyByIdAndIndex, DataType, LLMConfig, LLMDataDist,
                          LLMException, LLMRole, LLMStatusCode, Placement)

from conftest import alloc_filled, cluster_info, make_dist


def test_presets_give_devices_their_ips(world):
    assert kvsim.current_world() is not None
    assert world.preset == "atlas-a2"
    assert kvsim.device_ip(0) == "10.0.0.1"
    assert kvsim.device_ip(8) == "10.0.0.9"
    with pytest.raises(ValueError):
        kvsim.device_ip(world.device_count)


def test_listen_ip_must_be_the_devices_own(world):
    dist = LLMDataDist(LLMRole.DECODER, 2)
    cfg = LLMConfig()
    cfg.device_id = 1
    cfg.listen_ip_info = "10.0.0.9:26000"
    with pytest.raises(LLMException):
        dist.init(cfg.generate_options())


def test_world_is_replaced_only_when_no_llmdatadist_is_initialized(world):
    dist = make_dist(LLMRole.PROMPT, 1, 0, False)
    with pytest.raises(RuntimeError):
        kvsim.World("atlas-a3")
    dist.finalize()
    new = kvsim.World("atlas-a3", overrides={"devices_per_node": 16})
    assert new.preset == "atlas-a3" and not world.alive
    with pytest.raises(RuntimeError):
        dist.finalize()  # its world is gone
    with pytest.raises(ValueError):
        kvsim.World("no-such-preset")


def test_memory_bytes_and_numpy(world):
    addr = kvsim.alloc(3, 4 << 20)
    assert addr % (2 << 20) == 0
    kvsim.write(addr, b"\x01\x02\x03")
    assert kvsim.read(addr, 4)[:3] == b"\x01\x02\x03"
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    kvsim.write(addr + 64, array)
    assert np.array_equal(kvsim.read_array(addr + 64, np.float32, (3, 4)), array)
    host = kvsim.alloc(0, 1 << 20, Placement.HOST)
    assert kvsim.free(host)
    with pytest.raises(ValueError):
        kvsim.write(12345, b"x")


def test_default_world_comes_from_kvsim_preset():
    code = ("import kvsim, llm_datadist as l; d = l.LLMDataDist(l.LLMRole.PROMPT, 1); "
            "print(kvsim.current_world().preset)")
    env = dict(os.environ, KVSIM_PRESET="atlas-a3")
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "atlas-a3"


def test_link_faults_from_python_reach_the_api_as_the_library_reports_them(pair):
    """A script can fail a link of its world (World.schedule_link_event): the pull meets the
    status of the fault matrix (LLM_SUSPECT_REMOTE_ERROR as LLMException), the world reports its
    state (World.inventory). Once the link is back the same pull still fails until the link is
    made again: the library's status table says a failed transfer leaves its link unrecoverable
    until relinked (hixl LLMStatusCode.md, LLM_TIMEOUT row)."""
    world = kvsim.current_world()
    desc = CacheDesc(2, [1, 4096], DataType.DT_INT8, Placement.DEVICE)
    src = pair.d.cache_manager.register_cache(desc, alloc_filled(8, desc))
    dst = pair.p.cache_manager.register_cache(desc, alloc_filled(0, desc))
    assert "roce n0d0" in world.links
    before = world.inventory()
    assert before["engines"][1]["links"] == ["2"] and before["open_batches"] == 0
    world.schedule_link_event("roce n0d0", kvsim.now(), "down")
    with pytest.raises(LLMException) as e:
        pair.p.cache_manager.pull_cache(CacheKeyByIdAndIndex(2, src.cache_id, 0), dst)
    assert e.value.status_code == LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR
    after = world.inventory()
    assert after["engines"] == before["engines"] and after["memory_bytes"] == before["memory_bytes"]
    world.schedule_link_event("roce n0d0", kvsim.now(), "up")
    kvsim.sleep(1e-6)
    with pytest.raises(LLMException) as e:
        pair.p.cache_manager.pull_cache(CacheKeyByIdAndIndex(2, src.cache_id, 0), dst)
    assert e.value.status_code == LLMStatusCode.LLM_FAILED
    info = cluster_info(2, 8)
    assert pair.p.unlink_clusters([info], force=True)[0] == LLMStatusCode.LLM_SUCCESS
    assert pair.p.link_clusters([info])[0] == LLMStatusCode.LLM_SUCCESS
    pair.p.cache_manager.pull_cache(CacheKeyByIdAndIndex(2, src.cache_id, 0), dst)
    assert kvsim.read(dst.tensor_addrs[1], 4096) == kvsim.read(src.tensor_addrs[1], 4096)


@pytest.mark.parametrize("args, argument, rule", [
    (("roce n9d9", 0.0, "down"), "link", "no link named 'roce n9d9'"),
    (("roce n0d0", 0.0, "flap"), "kind", "must be 'down', 'up' or 'degrade'"),
    (("roce n0d0", 0.0, "degrade", 0.0), "factor", "must be in (0, 1]"),
    (("roce n0d0", float("nan"), "down"), "at", "finite number of seconds"),
    (("roce n0d0", 1e30, "down"), "at", "below 9.2e6 seconds"),
])
def test_bad_link_events_name_the_argument_and_change_nothing(world, args, argument, rule):
    with pytest.raises(ValueError) as e:
        world.schedule_link_event(*args)
    assert argument in str(e.value) and rule in str(e.value)
    assert world.inventory()["open_batches"] == 0
