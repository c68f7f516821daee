"""The library's option semantics where kvsim once differed from it (hicann/hixl
src/python/llm_datadist/llm_datadist/v2/llm_datadist.py, cache_manager.py; link_msg_handler.cc,
hixl_transfer_engine.cc; hicann/ge llm_datadist_v1)."""
import os

import pytest

import kvsim
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMClusterInfo, LLMConfig,
                          LLMDataDist, LLMException, LLMRole, LLMStatusCode)

from conftest import cluster_info, listen_address, make_dist

POOL = '{"memory_size": 67108864}'


def test_a_script_with_the_librarys_defaults_gets_the_v1_kv_cache_manager(world):
    dist = LLMDataDist(LLMRole.DECODER, 1)
    config = LLMConfig()  # enable_cache_manager unset, as in scripts written for v1
    config.device_id = 0
    config.mem_pool_cfg = POOL
    dist.init(config.generate_options())
    cache = dist.kv_cache_manager.allocate_cache(CacheDesc(2, [4, 1024], DataType.DT_FLOAT16))
    assert len(cache.per_device_tensor_addrs[0]) == 2
    with pytest.raises(LLMException) as e:
        dist.cache_manager
    assert e.value.status_code == LLMStatusCode.LLM_PARAM_INVALID
    assert "cache_manager is not supported when llm.EnableCacheManager is not configured." in \
        str(e.value)
    dist.kv_cache_manager.deallocate_cache(cache)
    dist.finalize()


def test_local_comm_res_turns_on_the_cache_manager_and_remote_access(world):
    config = LLMConfig()
    config.device_id = 0
    config.local_comm_res = ""  # as the push samples set it
    dist = LLMDataDist(LLMRole.DECODER, 1)
    dist.init(config.generate_options())
    cache = dist.cache_manager.register_cache(CacheDesc(2, [1, 4096], DataType.DT_INT8),
                                              [kvsim.alloc(0, 4096) for _ in range(2)])
    assert cache.cache_id == 1
    with pytest.raises(LLMException) as e:
        dist.kv_cache_manager
    assert "kv_cache_manager is not supported when llm.EnableCacheManager is configured." in \
        str(e.value)
    dist.finalize()


def test_v2_switch_role_needs_no_enable_switch_role_and_moves_the_listener(world):
    p = make_dist(LLMRole.PROMPT, 1, 0, True)
    d = make_dist(LLMRole.DECODER, 2, 8, False)
    assert d.link_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    with pytest.raises(LLMException) as e:
        p.switch_role(LLMRole.DECODER)  # a link remains, on the server's side too
    assert e.value.status_code == LLMStatusCode.LLM_EXIST_LINK
    assert d.unlink_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    p.switch_role(LLMRole.DECODER)  # no options: it stops listening
    assert d.link_clusters([cluster_info(1, 0, 8)], 200)[0] == LLMStatusCode.LLM_LINK_FAILED
    ip, _ = listen_address(8)
    d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{ip}:26100"})
    info = LLMClusterInfo()
    info.remote_cluster_id = 2
    info.append_local_ip_info(kvsim.host_ip(0), 0)
    info.append_remote_ip_info(ip, 26100)
    assert p.link_clusters([info])[0] == LLMStatusCode.LLM_SUCCESS
    p.finalize()
    d.finalize()


def blocks_cache(dist, device, value, key):
    desc = CacheDesc(2, [4, 256], DataType.DT_INT8)
    addrs = [kvsim.alloc(device, desc.size) for _ in range(2)]
    for a in addrs:
        kvsim.write(a, bytes([value]) * desc.size)
    return dist.cache_manager.register_blocks_cache(desc, addrs, key)


@pytest.mark.parametrize("hixl", [False, True])
def test_links_towards_each_other(world, hixl):
    """The comm backend keeps one link per pair, whoever made it: the second direction is
    LLM_ALREADY_LINK. The hixl backend's links are the client's, so both directions exist and
    each side pulls or pushes over its own."""
    extra = {"local_comm_res": "", "transfer_backend": "hixl"} if hixl else \
        {"enable_remote_cache_accessible": True}
    p = make_dist(LLMRole.PROMPT, 1, 0, True, **extra)
    d = make_dist(LLMRole.DECODER, 2, 8, True, **extra)
    pc = blocks_cache(p, 0, 1, BlocksCacheKey(1, 0))
    dc = blocks_cache(d, 8, 2, BlocksCacheKey(2, 0))
    assert p.link_clusters([cluster_info(2, 8, 0)])[0] == LLMStatusCode.LLM_SUCCESS
    second = d.link_clusters([cluster_info(1, 0, 8)])[0]
    if not hixl:
        assert second == LLMStatusCode.LLM_ALREADY_LINK
    else:
        assert second == LLMStatusCode.LLM_SUCCESS
        p.cache_manager.pull_blocks(BlocksCacheKey(2, 0), pc, src_blocks=[3], dst_blocks=[3])
        d.cache_manager.push_blocks(BlocksCacheKey(1, 0), dc, src_blocks=[0], dst_blocks=[0])
        block = 256
        got = kvsim.read(pc.tensor_addrs[1], 4 * block)
        assert got == bytes([2]) * block + bytes([1]) * 2 * block + bytes([2]) * block
        # Unlinking one direction leaves the other.
        assert p.unlink_clusters([cluster_info(2, 8, 0)])[0] == LLMStatusCode.LLM_SUCCESS
        with pytest.raises(LLMException) as e:
            p.cache_manager.pull_blocks(BlocksCacheKey(2, 0), pc, src_blocks=[3], dst_blocks=[3])
        assert e.value.status_code == LLMStatusCode.LLM_NOT_YET_LINK
        d.cache_manager.push_blocks(BlocksCacheKey(1, 0), dc, src_blocks=[1], dst_blocks=[1])
    p.finalize()
    d.finalize()


def test_pull_blocks_without_layer_ranges_copies_every_tensor(world):
    """tensor_num_per_layer only matters with a layer range (DataCacheEngine::CheckTensorIndices):
    the official pull_blocks sample pulls a one-tensor cache with the default of 2."""
    p = make_dist(LLMRole.PROMPT, 1, 0, True, enable_remote_cache_accessible=True)
    d = make_dist(LLMRole.DECODER, 2, 8, False, enable_remote_cache_accessible=True)
    desc = CacheDesc(1, [2, 1024], DataType.DT_INT8)
    src = [kvsim.alloc(0, desc.size)]
    kvsim.write(src[0], os.urandom(desc.size))
    p.cache_manager.register_blocks_cache(desc, src, BlocksCacheKey(1, 0))
    dst = d.cache_manager.register_blocks_cache(desc, [kvsim.alloc(8, desc.size)])
    assert d.link_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    d.cache_manager.pull_blocks(BlocksCacheKey(1, 0), dst, src_blocks=[0, 1], dst_blocks=[1, 0])
    data = kvsim.read(src[0], desc.size)
    assert kvsim.read(dst.tensor_addrs[0], desc.size) == data[1024:] + data[:1024]
    p.finalize()
    d.finalize()


def test_unregistering_while_a_decoder_is_linked_is_a_diagnostic(world):
    p = make_dist(LLMRole.PROMPT, 1, 0, True)
    d = make_dist(LLMRole.DECODER, 2, 8, False)
    cache = p.cache_manager.register_cache(CacheDesc(2, [1, 4096], DataType.DT_INT8),
                                           [kvsim.alloc(0, 4096) for _ in range(2)])
    assert d.link_clusters([cluster_info(1, 0, 8)])[0] == LLMStatusCode.LLM_SUCCESS
    p.cache_manager.unregister_cache(cache.cache_id)
    kinds = [x.kind for x in kvsim.diagnostics()]
    assert "UnregisterWhileLinked" in kinds
    p.cache_manager.unregister_cache(cache.cache_id)  # unknown now: the library succeeds too
    assert [x.kind for x in kvsim.diagnostics()][-1] == "UnregisterUnknownCache"
    p.finalize()
    d.finalize()
