"""The decoder pulls a request's blocks with pull_blocks over an HCCL comm domain, as vLLM-Ascend's
LLMDataDistCMgrConnector does (spec 8): cache manager, remote-accessible caches and switch-role
on; K and V registered as separate blocks caches (model_id 0 and 1) before linking; 2 MiB aligned
addresses; sync_kv_timeout 33064 ms; a v1.2 rank table and link(name, {P: 0, D: 1}, rank_table)
on both sides, then query_register_mem_status polled every second until OK.

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/pull_blocks_vllm_ascend.py
"""
import json
import os

import kvsim
from llm_datadist import BlocksCacheKey, CacheDesc, DataType, LLMRole, RegisterMemStatus

from _common import init_llm_datadist

NUM_LAYERS, NUM_BLOCKS, BLOCK_BYTES = 8, 16, 32 * 1024
P_ID, D_ID, P_DEV, D_DEV = 0, 1, 0, 8
DEVICES_PER_SERVER = 8  # atlas-a2: devices 0-7 on server 0, 8-15 on server 1
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


def rank_table(prefill_device, decode_device):
    """A v1.2 rank table with P as rank 0 and D as rank 1, one server each (the connector's)."""
    def server(device, rank):
        return {"device": [{"device_id": str(device % DEVICES_PER_SERVER),
                            "device_ip": kvsim.device_ip(device), "rank_id": str(rank)}],
                "server_id": str(device // DEVICES_PER_SERVER)}
    return json.dumps({"version": "1.2", "server_count": "2", "status": "completed",
                       "server_list": [server(prefill_device, 0), server(decode_device, 1)]})


def wait_linked(datadist, comm_id):
    """The connector's loop: poll query_register_mem_status every second until OK."""
    while True:
        status = datadist.query_register_mem_status(comm_id=comm_id)
        if status == RegisterMemStatus.OK:
            return
        if status == RegisterMemStatus.FAILED:
            raise RuntimeError(f"linking failed, comm id {comm_id}")
        kvsim.sleep(1)  # time.sleep(1) in the connector; here the time is simulated


def main():
    prompt = init_llm_datadist(LLMRole.PROMPT, P_ID, P_DEV, listen=False, **CONFIG)
    decoder = init_llm_datadist(LLMRole.DECODER, D_ID, D_DEV, listen=False, **CONFIG)
    p_caches = register_kv(prompt, P_DEV, P_ID, fill=True)
    d_caches = register_kv(decoder, D_DEV, D_ID, fill=False)

    comm_name = f"pd_comm_{kvsim.device_ip(P_DEV)}_{kvsim.device_ip(D_DEV)}"
    cluster_rank_info = {P_ID: 0, D_ID: 1}
    table = rank_table(P_DEV, D_DEV)
    p_comm = prompt.link(comm_name, cluster_rank_info, table)
    d_comm = decoder.link(comm_name, cluster_rank_info, table)
    wait_linked(decoder, d_comm)
    wait_linked(prompt, p_comm)
    print(f"comm domain {comm_name} ready at {kvsim.now():.0f} simulated s")

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
    decoder.unlink(d_comm)
    prompt.unlink(p_comm)
    prompt.finalize()
    decoder.finalize()


if __name__ == "__main__":
    main()
