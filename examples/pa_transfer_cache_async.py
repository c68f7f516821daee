"""PA variant (spec 8): blocks 0 and 1 of the prompt's cache into blocks 2 and 3 of the decoder's.

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/pa_transfer_cache_async.py
"""
import os

import kvsim
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LayerSynchronizer, LLMRole,
                          LLMStatusCode, TransferConfig)

from _common import cluster_info, init_llm_datadist

NUM_LAYERS, NUM_BLOCKS, BLOCK_BYTES = 4, 8, 16 * 1024


class LayerSynchronizerImpl(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


def main():
    prompt = init_llm_datadist(LLMRole.PROMPT, 1, 0, listen=False)
    decoder = init_llm_datadist(LLMRole.DECODER, 2, 1, listen=True)
    ret, _ = prompt.link_clusters([cluster_info(2, 0, 1)])
    assert ret == LLMStatusCode.LLM_SUCCESS, ret
    desc = CacheDesc(2 * NUM_LAYERS, [NUM_BLOCKS, BLOCK_BYTES], DataType.DT_INT8)
    src = [kvsim.alloc(0, desc.size) for _ in range(2 * NUM_LAYERS)]
    for addr in src:
        kvsim.write(addr, os.urandom(desc.size))
    src_cache = prompt.cache_manager.register_blocks_cache(desc, src, BlocksCacheKey(1, 0))
    dst_cache = decoder.cache_manager.register_blocks_cache(
        desc, [kvsim.alloc(1, desc.size) for _ in range(2 * NUM_LAYERS)], BlocksCacheKey(2, 0))

    task = prompt.cache_manager.transfer_cache_async(
        src_cache, LayerSynchronizerImpl(), [TransferConfig(2, dst_cache.tensor_addrs)],
        [0, 1], [2, 3])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    for s, d in zip(src_cache.tensor_addrs, dst_cache.tensor_addrs):
        assert kvsim.read(s, 2 * BLOCK_BYTES) == kvsim.read(d + 2 * BLOCK_BYTES, 2 * BLOCK_BYTES)
    print("blocks [0, 1] arrived in blocks [2, 3] of every decoder tensor")
    prompt.finalize()
    decoder.finalize()


if __name__ == "__main__":
    main()
