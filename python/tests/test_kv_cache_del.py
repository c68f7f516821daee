"""v1 KvCache.__del__: a cache from allocate_cache / allocate_blocks_cache goes back to the pool
when Python drops it, as the real llm_datadist_v1 KvCache does; never raises."""
import gc
import os
import subprocess
import sys

import pytest

import kvsim
from llm_datadist import (BlocksCacheKey, CacheDesc, CacheKey, DataType, LayerSynchronizer,
                          LLMConfig, LLMException, LLMRole, LLMStatusCode, TransferConfig)

from conftest import cluster_info, listen_address, make_dist  # noqa: F401

MIB = 1 << 20
# Pool of 8 MiB; one cache of 2 tensors x 2 MiB takes half of it.
POOL = '{"memory_size": %d, "page_shift": 21}' % (8 * MIB)
DESC = CacheDesc(2, [1, 2 * MIB], DataType.DT_INT8)
BLOCKS_DESC = CacheDesc(2, [4, MIB // 2], DataType.DT_INT8)


_made = []


def v1_dist(role=LLMRole.PROMPT, cluster_id=1, device=0, listen=None):
    """A v1 engine; a v1 prompt listens (EngineConfig.gen_cluster_info_if_not_exist)."""
    if listen is None:
        listen = role == LLMRole.PROMPT
    dist = make_dist(role, cluster_id, device, listen, enable_cache_manager=False,
                     mem_pool_cfg=POOL)
    _made.append(dist)
    return dist


@pytest.fixture(autouse=True)
def finalize_all():
    yield
    while _made:
        try:
            _made.pop().finalize()
        except RuntimeError:  # its world was replaced
            pass


def fill_pool(manager):
    """Allocates until the pool is full; returns the caches."""
    caches = []
    with pytest.raises(LLMException) as e:
        for _ in range(8):
            caches.append(manager.allocate_cache(DESC))
    assert e.value.status_code == LLMStatusCode.LLM_OUT_OF_MEMORY
    assert len(caches) == 2
    return caches


def test_dropped_cache_returns_to_the_pool(world):
    dist = v1_dist()
    manager = dist.kv_cache_manager
    caches = fill_pool(manager)
    del caches[0]
    gc.collect()
    again = manager.allocate_cache(DESC)  # fits only because the dropped one was deallocated
    assert again.cache_id > 0
    dist.finalize()


def test_dropped_blocks_cache_returns_to_the_pool(world):
    dist = v1_dist()
    manager = dist.kv_cache_manager
    blocks = [manager.allocate_blocks_cache(BLOCKS_DESC, BlocksCacheKey(1, i)) for i in range(2)]
    with pytest.raises(LLMException):
        manager.allocate_cache(DESC)
    blocks.clear()
    manager.allocate_cache(DESC)
    dist.finalize()


def test_explicit_deallocate_then_del_is_quiet(world, capfd):
    dist = v1_dist()
    manager = dist.kv_cache_manager
    first, second = fill_pool(manager)
    first_id = first.cache_id
    manager.deallocate_cache(first)
    third = manager.allocate_cache(DESC)
    del first  # already deallocated: nothing to do, and it must not free `third`
    gc.collect()
    with pytest.raises(LLMException):
        manager.allocate_cache(DESC)
    assert third.cache_id not in (second.cache_id, first_id)
    dist.finalize()
    assert "Exception ignored" not in capfd.readouterr().err


def test_cache_with_keys_is_released_when_its_keys_are_gone(world):
    dist = v1_dist()
    manager = dist.kv_cache_manager
    key = CacheKey(1, 7)
    keyed = manager.allocate_cache(DESC, [key])
    other = manager.allocate_cache(DESC)
    del keyed  # deallocation waits for the key (spec 4)
    gc.collect()
    with pytest.raises(LLMException):
        manager.allocate_cache(DESC)
    manager.remove_cache_key(key)
    manager.allocate_cache(DESC)
    assert other.cache_id > 0
    dist.finalize()


def test_a_cache_of_a_finalized_session_is_left_alone(world, capfd):
    dist = v1_dist()
    old = dist.kv_cache_manager.allocate_cache(DESC)
    dist.finalize()
    dist.init(dist_options())
    caches = fill_pool(dist.kv_cache_manager)
    assert old.cache_id == caches[0].cache_id  # same id, other session
    del old  # its manager was finalized: the real __del__ skips it
    gc.collect()
    with pytest.raises(LLMException):  # so the new session's cache is still allocated
        dist.kv_cache_manager.allocate_cache(DESC)
    dist.finalize()
    assert "Exception ignored" not in capfd.readouterr().err


def test_a_cache_of_a_replaced_world_is_left_alone(world, capfd):
    dist = v1_dist()
    cache = dist.kv_cache_manager.allocate_cache(DESC)
    dist.finalize()
    kvsim.World("atlas-a2")
    del cache
    gc.collect()
    assert "Exception ignored" not in capfd.readouterr().err


def dist_options():
    cfg = LLMConfig()
    cfg.device_id = 0
    cfg.enable_cache_manager = False
    cfg.mem_pool_cfg = POOL
    ip, port = listen_address(0)
    cfg.listen_ip_info = f"{ip}:{port}"
    return cfg.generate_options()


def test_a_running_transfer_keeps_its_source_cache(world):
    p = v1_dist()
    d = v1_dist(LLMRole.DECODER, 2, 8)
    # v1 links go from the decoder to the prompt (hicann/ge llm_datadist.cc LinkClusters).
    assert d.link_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    src = p.kv_cache_manager.allocate_cache(DESC)
    dst = d.kv_cache_manager.allocate_cache(DESC)
    for a in src.per_device_tensor_addrs[0]:
        kvsim.write(a, os.urandom(DESC.size))
    gate = kvsim.Event()

    class Sync(LayerSynchronizer):
        def synchronize_layer(self, layer_index, timeout_in_millis):
            gate.wait()
            return True

    cfg = TransferConfig(2, dst.per_device_tensor_addrs[0], range(0, 1))
    task = p.kv_cache_manager.transfer_cache_async(src, Sync(), [cfg])
    src_addrs = src.per_device_tensor_addrs[0]
    filler = p.kv_cache_manager.allocate_cache(DESC)  # the pool is full now
    del src  # the task still holds it
    gc.collect()
    with pytest.raises(LLMException):
        p.kv_cache_manager.allocate_cache(DESC)
    gate.set()
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    for s, t in zip(src_addrs, dst.per_device_tensor_addrs[0]):
        assert kvsim.read(s, DESC.size) == kvsim.read(t, DESC.size)
    del task
    gc.collect()
    p.kv_cache_manager.allocate_cache(DESC)  # the source went back to the pool with the task
    assert filler.cache_id > 0
    p.finalize()
    d.finalize()


def test_a_running_job_keeps_its_source_cache_without_the_task(world):
    """Task and cache both dropped mid-transfer: the job still holds the cache (as the library's
    worker thread holds its arguments), the bytes arrive, and the cache is released after."""
    p = v1_dist()
    d = v1_dist(LLMRole.DECODER, 2, 8)
    # v1 links go from the decoder to the prompt (hicann/ge llm_datadist.cc LinkClusters).
    assert d.link_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    src = p.kv_cache_manager.allocate_cache(DESC)
    dst = d.kv_cache_manager.allocate_cache(DESC)
    payload = [os.urandom(DESC.size) for _ in src.per_device_tensor_addrs[0]]
    for a, data in zip(src.per_device_tensor_addrs[0], payload):
        kvsim.write(a, data)
    gate = kvsim.Event()

    class Sync(LayerSynchronizer):
        def synchronize_layer(self, layer_index, timeout_in_millis):
            gate.wait()
            return True

    cfg = TransferConfig(2, dst.per_device_tensor_addrs[0], range(0, 1))
    task = p.kv_cache_manager.transfer_cache_async(src, Sync(), [cfg])
    filler = p.kv_cache_manager.allocate_cache(DESC)  # the pool is full now
    del src, task
    gc.collect()
    with pytest.raises(LLMException):
        p.kv_cache_manager.allocate_cache(DESC)
    gate.set()
    kvsim.sleep(0.01)  # the job finishes in simulated time
    for data, t in zip(payload, dst.per_device_tensor_addrs[0]):
        assert kvsim.read(t, DESC.size) == data
    gc.collect()
    p.kv_cache_manager.allocate_cache(DESC)  # the source went back to the pool with the job
    assert filler.cache_id > 0
    p.finalize()
    d.finalize()


def test_a_cache_alive_at_interpreter_exit_is_quiet():
    script = (
        "import kvsim\n"
        "from llm_datadist import CacheDesc, DataType, LLMConfig, LLMDataDist, LLMRole\n"
        "dist = LLMDataDist(LLMRole.DECODER, 1)\n"
        "cfg = LLMConfig()\n"
        "cfg.device_id = 0\n"
        "cfg.enable_cache_manager = False\n"
        f"cfg.mem_pool_cfg = {POOL!r}\n"
        "dist.init(cfg.generate_options())\n"
        "kept = dist.kv_cache_manager.allocate_cache(CacheDesc(2, [1, 1024], DataType.DT_INT8))\n"
        "print(kept.cache_id)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
    assert out.stderr == ""
