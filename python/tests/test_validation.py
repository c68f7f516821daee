"""Every validation rule of spec 2.2, 2.3 and 3.1 raises the library's type and status code."""
import pytest

import kvsim
from llm_datadist import (BlocksCacheKey, Cache, CacheDesc, CacheKey, CacheKeyByIdAndIndex,
                          DataType, LayerSynchronizer, LLMConfig, LLMDataDist, LLMException,
                          LLMRole, LLMStatusCode, Placement, TransferConfig,
                          TransferWithCacheKeyConfig)

from conftest import alloc_filled, make_dist

PARAM = LLMStatusCode.LLM_PARAM_INVALID


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


@pytest.fixture
def env(pair):
    desc = CacheDesc(4, [2, 1024], DataType.DT_INT8)
    blocks_desc = CacheDesc(4, [4, 1024], DataType.DT_INT8)
    env = type("Env", (), {})()
    env.pair = pair
    env.cm = pair.p.cache_manager
    env.cache = env.cm.register_cache(desc, alloc_filled(0, desc))
    env.blocks = env.cm.register_blocks_cache(blocks_desc, alloc_filled(0, blocks_desc))
    env.dst = pair.d.cache_manager.register_cache(desc, alloc_filled(8, desc)).tensor_addrs
    env.dst_blocks = pair.d.cache_manager.register_blocks_cache(
        blocks_desc, alloc_filled(8, blocks_desc)).tensor_addrs
    return env


def cfg(env, **kw):
    return [TransferConfig(2, env.dst, **kw)]


TRANSFER_CASES = [
    # (name, call(env), exception type, status code or None)
    ("src not a Cache", lambda e: e.cm.transfer_cache_async("cache", Ready(), cfg(e)),
     TypeError, None),
    ("src HOST", lambda e: e.cm.transfer_cache_async(
        Cache.create_cpu_cache(CacheDesc(2, [1, 8], DataType.DT_INT8, Placement.HOST),
                               [1 << 20, 2 << 20]), Ready(), cfg(e)), LLMException, PARAM),
    ("block list not a list", lambda e: e.cm.transfer_cache_async(
        e.blocks, Ready(), cfg(e), "01", [2, 3]), TypeError, None),
    ("negative block index", lambda e: e.cm.transfer_cache_async(
        e.blocks, Ready(), cfg(e), [-1], [2]), ValueError, None),
    ("blocks to cache", lambda e: e.cm.transfer_cache_async(
        e.blocks, Ready(), cfg(e), [0, 1]), LLMException, PARAM),
    ("block lists of different lengths", lambda e: e.cm.transfer_cache_async(
        e.blocks, Ready(), cfg(e), [0, 1], [2]), LLMException, PARAM),
    ("contiguous to blocks without dst_block_memory_size", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), cfg(e), None, [2, 3]), LLMException, PARAM),
    ("dst_block_memory_size for a contiguous dst", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), cfg(e), None, None, 1024), LLMException, PARAM),
    ("synchronizer None", lambda e: e.cm.transfer_cache_async(e.cache, None, cfg(e)),
     TypeError, None),
    ("synchronizer of another class", lambda e: e.cm.transfer_cache_async(
        e.cache, object(), cfg(e)), TypeError, None),
    ("configs not a list", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), cfg(e)[0]), TypeError, None),
    ("config of another class", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), [e.dst]), TypeError, None),
    ("odd num_tensors", lambda e: e.cm.transfer_cache_async(
        e.cm.register_cache(CacheDesc(3, [1, 64], DataType.DT_INT8),
                            alloc_filled(0, CacheDesc(3, [1, 64], DataType.DT_INT8))),
        Ready(), cfg(e)), LLMException, PARAM),
    ("range beyond num_layers", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), [TransferConfig(2, e.dst * 2, range(0, 4))]), LLMException, PARAM),
    ("dst_addrs not 2 per layer", lambda e: e.cm.transfer_cache_async(
        e.cache, Ready(), [TransferConfig(2, e.dst[:3])]), LLMException, PARAM),
    ("PA source with src_batch_index", lambda e: e.cm.transfer_cache_async(
        e.blocks, Ready(), [TransferConfig(2, e.dst_blocks, None, 1)], [0], [1]),
     LLMException, PARAM),
]


@pytest.mark.parametrize("name,call,exc,code", TRANSFER_CASES, ids=[c[0] for c in TRANSFER_CASES])
def test_transfer_cache_async_validation(env, name, call, exc, code):
    with pytest.raises(exc) as info:
        call(env)
    if code is not None:
        assert info.value.status_code == code
    if exc is LLMException:
        assert isinstance(info.value, RuntimeError)


VALUE_CASES = [
    ("TransferConfig range step 2", lambda: TransferConfig(2, [1, 2], range(0, 4, 2)),
     LLMException, PARAM),
    ("TransferConfig empty range", lambda: TransferConfig(2, [1, 2], range(3, 3)),
     LLMException, PARAM),
    ("TransferConfig dst_addrs not a list", lambda: TransferConfig(2, 5), TypeError, None),
    ("TransferConfig negative address", lambda: TransferConfig(2, [-1, 2]), ValueError, None),
    ("TransferConfig src_batch_index beyond uint32",
     lambda: TransferConfig(2, [1, 2], None, 2 ** 32), ValueError, None),
    ("TransferConfig cluster beyond uint64", lambda: TransferConfig(2 ** 64, [1, 2]),
     ValueError, None),
    ("TransferWithCacheKeyConfig range None",
     lambda: TransferWithCacheKeyConfig(BlocksCacheKey(2), None, range(0, 1)), TypeError, None),
    ("TransferWithCacheKeyConfig lengths differ",
     lambda: TransferWithCacheKeyConfig(BlocksCacheKey(2), range(0, 1), range(0, 2)),
     LLMException, PARAM),
    ("TransferWithCacheKeyConfig blocks key with batch index",
     lambda: TransferWithCacheKeyConfig(BlocksCacheKey(2), range(0, 1), range(0, 1), 1),
     LLMException, PARAM),
    ("CacheKey negative req_id", lambda: CacheKey(1, -1), ValueError, None),
    ("CacheKey too many arguments", lambda: CacheKey(1, 2, 3, 4, 5), TypeError, None),
    ("CacheKeyByIdAndIndex batch beyond uint32",
     lambda: CacheKeyByIdAndIndex(1, 2, 2 ** 32), ValueError, None),
    ("CacheDesc num_tensors beyond uint32",
     lambda: CacheDesc(2 ** 32, [1], DataType.DT_INT8), ValueError, None),
    ("CacheDesc data_type not a DataType", lambda: CacheDesc(2, [1], 2), TypeError, None),
    ("CacheDesc batch_dim_index out of shape",
     lambda: CacheDesc(2, [1], DataType.DT_INT8, Placement.DEVICE, 1), LLMException, PARAM),
    ("LLMConfig negative device_id", lambda: setattr(LLMConfig(), "device_id", -1),
     LLMException, PARAM),
    ("LLMConfig sync_kv_timeout 0", lambda: setattr(LLMConfig(), "sync_kv_timeout", 0),
     LLMException, PARAM),
    ("LLMDataDist role not an LLMRole", lambda: LLMDataDist(1, 1), TypeError, None),
]


@pytest.mark.parametrize("name,call,exc,code", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_value_class_validation(world, name, call, exc, code):
    with pytest.raises(exc) as info:
        call()
    if code is not None:
        assert info.value.status_code == code


def test_calls_before_init_are_runtime_errors_and_init_twice_returns(world):
    dist = LLMDataDist(LLMRole.PROMPT, 7)
    with pytest.raises(RuntimeError) as info:
        dist.cache_manager
    assert not isinstance(info.value, LLMException)
    cfg = LLMConfig()
    cfg.device_id = 3
    cfg.enable_cache_manager = True
    dist.init(cfg.generate_options())
    cfg.device_id = 4
    dist.init(cfg.generate_options())  # initialized already: llm_datadist.py init returns
    dist.finalize()


def test_a_second_llmdatadist_of_the_script_is_a_diagnostic_or_strictly_llm_failed(world):
    first = make_dist(LLMRole.PROMPT, 1, 0, False)
    second = make_dist(LLMRole.DECODER, 2, 8, False)
    assert [d.kind for d in kvsim.diagnostics()] == ["SeveralDataDistsInProcess"]
    third = LLMDataDist(LLMRole.DECODER, 3)
    cfg = LLMConfig()
    cfg.device_id = 9
    options = cfg.generate_options()
    options["kvsim.Strict"] = "1"
    with pytest.raises(LLMException) as info:
        third.init(options)
    assert info.value.status_code == LLMStatusCode.LLM_FAILED
    assert "Cannot init multiple LLMDataDists" in str(info.value)
    second.finalize()
    first.finalize()


def test_none_src_layer_range_is_set_in_the_callers_config(env):
    config = TransferConfig(2, env.dst)
    assert config.src_layer_range is None
    task = env.cm.transfer_cache_async(env.cache, Ready(), [config])
    assert config.src_layer_range == range(0, 2)
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    kinds = [d.kind for d in task.diagnostics]
    assert kinds == ["SrcLayerRangeMutated"]


def test_task_timeouts_are_uint32_milliseconds(env):
    task = env.cm.transfer_cache_async(env.cache, Ready(), cfg(env))
    with pytest.raises(ValueError):
        task.synchronize(-1)
    with pytest.raises(ValueError):
        task.get_results(2 ** 32)
    assert task.get_results() == [LLMStatusCode.LLM_SUCCESS]


def test_status_codes_have_the_librarys_values():
    assert LLMStatusCode.LLM_SUCCESS.value == 0
    assert LLMStatusCode.LLM_FAILED.value == 0xFFFFFFFF
    assert LLMStatusCode.LLM_PARAM_INVALID.value == 0x5010B005
    assert LLMStatusCode.LLM_TIMEOUT.value == 1343270938
    assert not hasattr(LLMStatusCode, "LLM_CACHE_INCOMPATIBLE")  # C++ only (spec 6)
    assert LLMRole.PROMPT == 1 and LLMRole.DECODER == 2 and LLMRole.MIX == 3
    assert Placement.HOST == 0 and Placement.DEVICE == 1
    assert DataType.DT_BF16.value == 27
    assert issubclass(LLMException, RuntimeError)
    assert kvsim.World is not None
