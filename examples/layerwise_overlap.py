"""The documented per-layer event pattern (spec 8): a simulated prefill records one event per
layer, synchronize_layer waits on it, so each layer's transfer overlaps the next layers' compute.

Run: PYTHONPATH=<build>/python /usr/bin/python3 examples/layerwise_overlap.py
"""
import kvsim
from llm_datadist import (CacheDesc, DataType, LayerSynchronizer, LLMRole, LLMStatusCode,
                          TransferConfig)

from _common import cluster_info, init_llm_datadist

NUM_LAYERS = 40
LAYER_COMPUTE_S = 150e-6  # simulated prefill time per layer


class EventSynchronizer(LayerSynchronizer):
    """synchronize_layer(l) waits until the model has recorded events[l]."""

    def __init__(self, events):
        self.events = events
        self.released = []

    def synchronize_layer(self, layer_index, timeout_in_millis):
        self.events[layer_index].wait()
        self.released.append(kvsim.now())
        return True


def main():
    prompt = init_llm_datadist(LLMRole.PROMPT, 1, 0, listen=False)
    decoder = init_llm_datadist(LLMRole.DECODER, 2, 8, listen=True)
    prompt.link_clusters([cluster_info(2, 0, 8)])
    desc = CacheDesc(2 * NUM_LAYERS, [1, 256 * 1024], DataType.DT_INT8)
    kv_cache = prompt.cache_manager.register_cache(
        desc, [kvsim.alloc(0, desc.size) for _ in range(2 * NUM_LAYERS)])
    decoder_cache = decoder.cache_manager.register_cache(
        desc, [kvsim.alloc(8, desc.size) for _ in range(2 * NUM_LAYERS)])

    events = [kvsim.Event() for _ in range(NUM_LAYERS)]
    prefill_done = []

    def prefill():
        for layer in range(NUM_LAYERS):
            kvsim.sleep(LAYER_COMPUTE_S)  # compute layer `layer`
            events[layer].record()
        prefill_done.append(kvsim.now())

    start = kvsim.now()
    kvsim.spawn(prefill, "prefill")
    sync = EventSynchronizer(events)
    task = prompt.cache_manager.transfer_cache_async(
        kv_cache, sync, [TransferConfig(2, decoder_cache.tensor_addrs)])
    assert task.get_results() == [LLMStatusCode.LLM_SUCCESS]
    end = kvsim.now()
    print(f"prefill: {(prefill_done[0] - start) * 1e6:.1f} us, transfer finished "
          f"{(end - prefill_done[0]) * 1e6:.1f} us after it (one layer's transfer)")
    prompt.finalize()
    decoder.finalize()


if __name__ == "__main__":
    main()
