"""The seed example: 40 layers sent layer by layer with transfer_cache_async (spec 3).

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/seed_transfer_cache_async.py
"""
import os

import kvsim
from llm_datadist import (CacheDesc, DataType, LayerSynchronizer, LLMRole, LLMStatusCode,
                          TransferConfig)

from _common import cluster_info, init_llm_datadist

NUM_LAYERS = 40
PROMPT_DEVICE, DECODER_DEVICE = 0, 8  # two atlas-a2 nodes: RoCE between them


class LayerSynchronizerImpl(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


def main():
    prompt = init_llm_datadist(LLMRole.PROMPT, 1, PROMPT_DEVICE, listen=False)
    decoder = init_llm_datadist(LLMRole.DECODER, 2, DECODER_DEVICE, listen=True)
    ret, _ = prompt.link_clusters([cluster_info(2, PROMPT_DEVICE, DECODER_DEVICE)], 5000)
    assert ret == LLMStatusCode.LLM_SUCCESS, ret

    cache_desc = CacheDesc(2 * NUM_LAYERS, [1, 256 * 1024], DataType.DT_INT8)
    prompt_addrs = [kvsim.alloc(PROMPT_DEVICE, cache_desc.size) for _ in range(2 * NUM_LAYERS)]
    for addr in prompt_addrs:
        kvsim.write(addr, os.urandom(cache_desc.size))  # the "prefill" output
    kv_cache = prompt.cache_manager.register_cache(cache_desc, prompt_addrs)
    decoder_cache = decoder.cache_manager.register_cache(
        cache_desc, [kvsim.alloc(DECODER_DEVICE, cache_desc.size) for _ in range(2 * NUM_LAYERS)])
    decoder_addrs = decoder_cache.tensor_addrs  # exchanged out of band on real hardware

    kv_cache_manager = prompt.cache_manager
    transfer_config = TransferConfig(2, decoder_addrs, range(0, NUM_LAYERS), 0)
    start = kvsim.now()
    cache_task = kv_cache_manager.transfer_cache_async(kv_cache, LayerSynchronizerImpl(),
                                                       [transfer_config])
    ret = cache_task.synchronize()
    results = cache_task.get_results()
    print(f"synchronize: {ret}, results: {results}, "
          f"simulated time: {(kvsim.now() - start) * 1e6:.1f} us")
    assert ret == LLMStatusCode.LLM_SUCCESS and results == [LLMStatusCode.LLM_SUCCESS]
    for src, dst in zip(prompt_addrs, decoder_addrs):
        assert kvsim.read(src, cache_desc.size) == kvsim.read(dst, cache_desc.size)
    print("decoder bytes equal prompt bytes")
    prompt.finalize()
    decoder.finalize()


if __name__ == "__main__":
    main()
