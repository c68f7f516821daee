"""World selection, replacement rules and simulated memory access."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kvsim
from llm_datadist import LLMConfig, LLMDataDist, LLMException, LLMRole, Placement

from conftest import make_dist


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
