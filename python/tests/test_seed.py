"""The seed example of the issue, the PA variant and the pull_blocks flow, byte for byte."""
import kvsim
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LayerSynchronizer, LLMRole,
                          LLMStatusCode, TransferConfig)

from conftest import Pair, alloc_filled, cluster_info, make_dist

NUM_LAYERS = 40


class LayerSynchronizerImpl(LayerSynchronizer):
    def __init__(self):
        self.calls = []

    def synchronize_layer(self, layer_index, timeout_in_millis):
        self.calls.append((layer_index, timeout_in_millis))
        return True


def seed_run(num_layers):
    pair = Pair()
    desc = CacheDesc(2 * num_layers, [1, 256 * 1024], DataType.DT_INT8)
    kv_cache = pair.p.cache_manager.register_cache(desc, alloc_filled(0, desc))
    decoder_cache = pair.d.cache_manager.register_cache(desc, alloc_filled(8, desc))
    decoder_addrs = decoder_cache.tensor_addrs
    transfer_config = TransferConfig(2, decoder_addrs, range(0, num_layers), 0)
    sync = LayerSynchronizerImpl()
    start = kvsim.now_ps()
    cache_task = pair.p.cache_manager.transfer_cache_async(kv_cache, sync, [transfer_config])
    ret = cache_task.synchronize()
    duration = kvsim.now_ps() - start
    results = cache_task.get_results()
    equal = all(kvsim.read(s, desc.size) == kvsim.read(d, desc.size)
                for s, d in zip(kv_cache.tensor_addrs, decoder_addrs))
    pair.close()
    return ret, results, duration, sync.calls, equal


def test_seed_example_moves_every_byte_in_forty_times_one_layers_time():
    kvsim.World("atlas-a2")
    _, _, one_layer, _, _ = seed_run(1)
    kvsim.World("atlas-a2")
    ret, results, duration, calls, equal = seed_run(NUM_LAYERS)
    assert ret == LLMStatusCode.LLM_SUCCESS
    assert results == [LLMStatusCode.LLM_SUCCESS]
    assert equal
    assert calls == [(layer, None) for layer in range(NUM_LAYERS)]
    assert duration == NUM_LAYERS * one_layer  # layers go one after another on an idle path
    # Only what hosting both engines in one script costs (one process per LLMDataDist on
    # hardware).
    assert [d.kind for d in kvsim.diagnostics()] == ["SeveralDataDistsInProcess"]


def test_pa_variant_sends_blocks_0_1_into_2_3(world):
    pair = Pair(d_dev=1)
    desc = CacheDesc(4, [6, 4096], DataType.DT_INT8)
    src = pair.p.cache_manager.register_blocks_cache(desc, alloc_filled(0, desc),
                                                     BlocksCacheKey(1, 0))
    dst = pair.d.cache_manager.register_blocks_cache(desc, alloc_filled(1, desc),
                                                     BlocksCacheKey(2, 0))
    before = [kvsim.read(a, desc.size) for a in dst.tensor_addrs]
    task = pair.p.cache_manager.transfer_cache_async(
        src, LayerSynchronizerImpl(), [TransferConfig(2, dst.tensor_addrs)], [0, 1], [2, 3])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    for s, d, old in zip(src.tensor_addrs, dst.tensor_addrs, before):
        expected = old[:2 * 4096] + kvsim.read(s, 2 * 4096) + old[4 * 4096:]
        assert kvsim.read(d, desc.size) == expected
    pair.close()


def test_pull_blocks_as_vllm_ascend_uses_it(world):
    config = dict(enable_cache_manager=True, enable_remote_cache_accessible=True,
                  enable_switch_role=True, sync_kv_timeout=33064)
    prompt = make_dist(LLMRole.PROMPT, 0, 0, True, **config)
    decoder = make_dist(LLMRole.DECODER, 1, 8, False, **config)
    desc = CacheDesc(4, [8, 8192], DataType.DT_INT8)  # K cache: one tensor per layer
    p_cache = prompt.cache_manager.register_blocks_cache(desc, alloc_filled(0, desc),
                                                         BlocksCacheKey(0, 0))
    d_cache = decoder.cache_manager.register_blocks_cache(desc, alloc_filled(8, desc),
                                                          BlocksCacheKey(1, 0))
    ret, _ = decoder.link_clusters([cluster_info(0, 0)])
    assert ret == LLMStatusCode.LLM_SUCCESS
    start = kvsim.now_ps()
    decoder.cache_manager.pull_blocks(BlocksCacheKey(0, 0), d_cache, [1, 2, 6], [4, 5, 0],
                                      src_layer_range=range(0, 4), dst_layer_range=range(0, 4),
                                      tensor_num_per_layer=1)
    assert kvsim.now_ps() > start
    for s, d in zip(p_cache.tensor_addrs, d_cache.tensor_addrs):
        for sb, db in ((1, 4), (2, 5), (6, 0)):
            assert kvsim.read(s + sb * 8192, 8192) == kvsim.read(d + db * 8192, 8192)
    prompt.finalize()
    decoder.finalize()
