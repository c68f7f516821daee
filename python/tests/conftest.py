"""Fixtures: a fresh atlas-a2 world per test and a linked prompt/decoder pair in it."""
import os

import pytest

import kvsim
from llm_datadist import LLMClusterInfo, LLMConfig, LLMDataDist, LLMRole, LLMStatusCode


@pytest.fixture
def world():
    w = kvsim.World("atlas-a2")
    yield w
    if w.alive:
        assert w.job_failures == []


class Pair:
    """Prompt cluster 1 on device 0, decoder cluster 2 (listening) on device `d_dev`."""

    def __init__(self, d_dev=8, **config):
        self.p = make_dist(LLMRole.PROMPT, 1, 0, False, **config)
        self.d = make_dist(LLMRole.DECODER, 2, d_dev, True, **config)
        self.d_dev = d_dev
        ret, codes = self.p.link_clusters([cluster_info(2, d_dev)])
        assert ret == LLMStatusCode.LLM_SUCCESS and codes == [LLMStatusCode.LLM_SUCCESS]

    def close(self):
        self.p.finalize()
        self.d.finalize()


def listen_address(device):
    """(ip, port) a test engine on `device` listens at: its node's host, port 26000 + device."""
    return kvsim.host_ip(kvsim.node_of(device)), 26000 + device


def make_dist(role, cluster_id, device, listen, **config):
    """An initialized LLMDataDist; v2 (enable_cache_manager=True) unless config says otherwise."""
    dist = LLMDataDist(role, cluster_id)
    cfg = LLMConfig()
    cfg.device_id = device
    cfg.enable_cache_manager = True
    if listen:
        ip, port = listen_address(device)
        cfg.listen_ip_info = f"{ip}:{port}"
    for k, v in config.items():
        setattr(cfg, k, v)
    dist.init(cfg.generate_options())
    return dist


def cluster_info(cluster_id, device, local_device=0):
    """LLMClusterInfo to the engine listening for `device`, linked from `local_device`."""
    info = LLMClusterInfo()
    info.remote_cluster_id = cluster_id
    info.append_local_ip_info(kvsim.host_ip(kvsim.node_of(local_device)), 0)
    info.append_remote_ip_info(*listen_address(device))
    return info


def alloc_filled(device, desc, count=None):
    addrs = [kvsim.alloc(device, desc.size) for _ in range(count or desc.num_tensors)]
    for a in addrs:
        kvsim.write(a, os.urandom(desc.size))
    return addrs


@pytest.fixture
def pair(world):
    p = Pair()
    yield p
    p.close()
