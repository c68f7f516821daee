"""The decoder pulls a request's blocks with pull_blocks, as vLLM-Ascend's LLMDataDistCMgrConnector
does (spec 8): cache manager, remote-accessible caches and switch-role on; K and V registered as
separate blocks caches (model_id 0 and 1); 2 MiB aligned addresses; sync_kv_timeout 33064 ms.

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/pull_blocks_vllm_ascend.py
"""
import os

import kvsim
from llm_datadist import BlocksCacheKey, CacheDesc, DataType, LLMRole, LLMStatusCode

from _common import cluster_info, init_llm_datadist

NUM_LAYERS, NUM_BLOCKS, BLOCK_BYTES = 8, 16, 32 * 1024
P_ID, D_ID, P_DEV, D_DEV = 0, 1, 0, 8
CONFIG = dict(enable_cache_manager=True, enable_remote_cache_accessible=True,
              enable_switch_role=True, sync_kv_timeout=33064)


def register_kv(datadist, device, cluster_id, fill):
    """K and V caches (one tensor per layer each), as the connector registers them."""
    desc = CacheDesc(NUM_LAYERS, [NUM_BLOCKS, BLOCK_BYTES], DataType.DT_INT8)
    caches = []
    for model_id in (0, 1):
        addrs = [kvsim.alloc(device, desc.size) for _ in range(NUM_LAYERS)]
        assert all(a % (2 << 20) == 0 for a in addrs)  # the connector asserts 2 MiB alignment
        if fill:
            for a in addrs:
                kvsim.write(a, os.urandom(desc.size))
        caches.append(datadist.cache_manager.register_blocks_cache(
            desc, addrs, BlocksCacheKey(cluster_id, model_id)))
    return caches


def main():
    prompt = init_llm_datadist(LLMRole.PROMPT, P_ID, P_DEV, listen=True, **CONFIG)
    decoder = init_llm_datadist(LLMRole.DECODER, D_ID, D_DEV, listen=False, **CONFIG)
    p_caches = register_kv(prompt, P_DEV, P_ID, fill=True)
    d_caches = register_kv(decoder, D_DEV, D_ID, fill=False)
    ret, _ = decoder.link_clusters([cluster_info(P_ID, D_DEV, P_DEV)])
    assert ret == LLMStatusCode.LLM_SUCCESS, ret

    src_blocks, dst_blocks = [3, 4, 5, 9], [0, 1, 2, 7]
    start = kvsim.now()
    for model_id, d_cache in enumerate(d_caches):
        decoder.cache_manager.pull_blocks(BlocksCacheKey(P_ID, model_id), d_cache,
                                          src_blocks, dst_blocks,
                                          src_layer_range=range(0, NUM_LAYERS),
                                          dst_layer_range=range(0, NUM_LAYERS),
                                          tensor_num_per_layer=1)
    print(f"pulled {len(src_blocks)} blocks x {NUM_LAYERS} layers x K,V in "
          f"{(kvsim.now() - start) * 1e6:.1f} simulated us")
    for p_cache, d_cache in zip(p_caches, d_caches):
        for s_addr, d_addr in zip(p_cache.tensor_addrs, d_cache.tensor_addrs):
            for s, d in zip(src_blocks, dst_blocks):
                assert (kvsim.read(s_addr + s * BLOCK_BYTES, BLOCK_BYTES)
                        == kvsim.read(d_addr + d * BLOCK_BYTES, BLOCK_BYTES))
    print("decoder blocks equal the prompt's")
    decoder.unlink_clusters([cluster_info(P_ID, D_DEV, P_DEV)], force=True)
    prompt.finalize()
    decoder.finalize()


if __name__ == "__main__":
    main()
