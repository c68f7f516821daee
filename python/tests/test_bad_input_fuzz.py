"""Any argument of any type in any position of the API's calls gives the library's own errors
(TypeError, ValueError or LLMException), never a bare RuntimeError, a crash or another type; a
rejected call changes no cache and leaves the world usable (issue: hardening, bad input).

Hypothesis draws the calls: one argument of a valid call replaced by a drawn value."""
import kvsim
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_datadist import (BlocksCacheKey, Cache, CacheDesc, CacheKey, CacheKeyByIdAndIndex,
                          DataType, LayerSynchronizer, LLMClusterInfo, LLMConfig, LLMDataDist,
                          LLMException, LLMRole, Placement, TransferConfig)

from conftest import alloc_filled, cluster_info

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.binary(max_size=4),
    st.lists(st.one_of(st.integers(min_value=-2**66, max_value=2**66), st.none(), st.text(max_size=3)),
             max_size=4),
    st.dictionaries(st.integers(min_value=-3, max_value=2**65), st.integers(-3, 2**65), max_size=2),
    st.just(object()), st.just(range(0, 2)), st.sampled_from(list(DataType.__members__.values())))


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


@pytest.fixture(scope="module")
def env():
    world = kvsim.World("atlas-a2")
    from conftest import Pair
    pair = Pair()
    desc = CacheDesc(4, [2, 1024], DataType.DT_INT8)
    bdesc = CacheDesc(4, [4, 1024], DataType.DT_INT8)
    e = type("Env", (), {})()
    e.world, e.pair, e.desc = world, pair, desc
    e.cm, e.dcm = pair.p.cache_manager, pair.d.cache_manager
    e.cache = e.cm.register_cache(desc, alloc_filled(0, desc))
    e.blocks = e.cm.register_blocks_cache(bdesc, alloc_filled(0, bdesc))
    e.dst = e.dcm.register_cache(desc, alloc_filled(8, desc))
    e.calls = {
        "CacheDesc": (CacheDesc, [4, [2, 1024], DataType.DT_INT8]),
        "CacheKey": (CacheKey, [1, 2, 3]),
        "CacheKeyByIdAndIndex": (CacheKeyByIdAndIndex, [1, 2, 0]),
        "BlocksCacheKey": (BlocksCacheKey, [1, 0]),
        "TransferConfig": (TransferConfig, [2, e.dst.tensor_addrs, range(0, 2), 0]),
        "LLMDataDist": (LLMDataDist, [LLMRole.PROMPT, 5]),
        "allocate_cache": (e.cm.allocate_cache, [desc]),
        "transfer_cache_async": (e.cm.transfer_cache_async,
                                 [e.cache, Ready(), [TransferConfig(2, e.dst.tensor_addrs)]]),
        "pull_cache": (e.dcm.pull_cache, [CacheKeyByIdAndIndex(1, e.cache.cache_id, 0), e.dst, 0]),
        "pull_blocks": (e.dcm.pull_blocks, [BlocksCacheKey(1, 0), e.dst, [0], [0]]),
        "copy_cache": (e.cm.copy_cache, [e.cache, e.cache, 0, 0, 0]),
        "swap_blocks": (e.cm.swap_blocks, [e.blocks, e.blocks, {0: 1}]),
        "append_local_ip_info": (LLMClusterInfo().append_local_ip_info, ["10.0.0.1", 0]),
        "append_remote_ip_info": (LLMClusterInfo().append_remote_ip_info, ["10.0.0.1", 0]),
        "link_clusters": (pair.p.link_clusters, [[cluster_info(2, 8)], 1000]),
        "unlink_clusters": (pair.p.unlink_clusters, [[cluster_info(7, 9)], 1000]),
        "create_cpu_cache": (Cache.create_cpu_cache,
                             [CacheDesc(2, [1, 8], DataType.DT_INT8, Placement.HOST),
                              [1 << 20, 2 << 20]]),
    }
    yield e
    pair.close()


def snapshot(e):
    return [kvsim.read(a, e.desc.size) for a in e.cache.tensor_addrs + e.dst.tensor_addrs]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_bad_argument_gives_the_librarys_error_types(env, data):
    name = data.draw(st.sampled_from(sorted(env.calls)), label="call")
    call, args = env.calls[name]
    args = list(args)
    position = data.draw(st.integers(0, len(args) - 1), label="position")
    args[position] = data.draw(VALUES, label="value")
    before = snapshot(env)
    try:
        result = call(*args)
    except (TypeError, ValueError, LLMException) as e:
        assert snapshot(env) == before, f"{name} changed a cache and failed: {e}"
        return
    except RuntimeError as e:
        # The library's own RuntimeError for an IP string it cannot parse (hixl
        # src/python/llm_datadist/llm_datadist/configs.py, trans_str_ip).
        assert name.endswith("_ip_info") and "Can not parse ip str" in str(e), (name, e)
        return
    # Accepted: a task finishes; an allocated cache is given back.
    if hasattr(result, "synchronize"):
        result.synchronize()
    if name == "allocate_cache":
        env.cm.deallocate_cache(result)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(attr=st.sampled_from([a for a in dir(LLMConfig) if not a.startswith("_")
                             and isinstance(getattr(LLMConfig, a), property)
                             and getattr(LLMConfig, a).fset is not None]),
       value=VALUES)
def test_config_setters_give_the_librarys_error_types(attr, value):
    config = LLMConfig()
    try:
        setattr(config, attr, value)
    except (TypeError, ValueError, LLMException):
        pass


def test_the_world_still_works_after_the_bad_calls(env):
    # Accepted calls above may have moved bytes between the fixture's caches: use fresh ones.
    src = env.cm.register_cache(env.desc, alloc_filled(0, env.desc))
    dst = env.dcm.register_cache(env.desc, alloc_filled(8, env.desc))
    env.pair.p.link_clusters([cluster_info(2, 8)], 1000)  # relinks if a drawn call unlinked
    task = env.cm.transfer_cache_async(src, Ready(), [TransferConfig(2, dst.tensor_addrs)])
    task.synchronize()
    # TransferConfig's default src_batch_index 0: the first row (1024 bytes) of every tensor.
    assert [kvsim.read(a, 1024) for a in dst.tensor_addrs] == \
        [kvsim.read(a, 1024) for a in src.tensor_addrs]


def test_an_ip_int_beyond_32_bits_is_a_value_error():
    # Found by the outside campaign: 2**32 + 10.0.0.9 was truncated to 10.0.0.9 and linked.
    info = LLMClusterInfo()
    for append in (info.append_remote_ip_info, info.append_local_ip_info):
        with pytest.raises(ValueError, match="ip.*2\\*\\*32-1"):
            append(2**32 + 0x0900000A, 26000)
        with pytest.raises(ValueError):
            append(-1, 26000)


def test_a_layer_range_beyond_int64_is_a_value_error(env):
    with pytest.raises(ValueError, match="src_layer_range.stop"):
        env.dcm.pull_blocks(BlocksCacheKey(1, 0), env.dst, [0], [0],
                            src_layer_range=range(0, 2**64))
    with pytest.raises(ValueError, match="src_layer_range.start"):
        TransferConfig(2, env.dst.tensor_addrs, range(-2**63 - 1, 2), 0)


def test_reading_more_than_the_memory_holds_is_checked_before_allocating(env):
    with pytest.raises(ValueError, match="outside the memory"):
        kvsim.read(env.cache.tensor_addrs[0], 2**62)
