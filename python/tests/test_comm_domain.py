"""The comm-domain API (spec 4): link, unlink and query_register_mem_status with the real Python's
argument checks (spec 2.3), the rendezvous in simulated time, and pulls over a formed domain."""
import json

import pytest

import kvsim
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMException, LLMRole,
                          LLMStatusCode, RegisterMemStatus)

from conftest import alloc_filled, make_dist

PARAM = LLMStatusCode.LLM_PARAM_INVALID
PD = {1: 0, 2: 1}


def rank_table(*devices):
    """v1.2, one server per device, rank i on devices[i]."""
    return json.dumps({"version": "1.2", "server_count": str(len(devices)), "status": "completed",
                       "server_list": [{"server_id": str(i), "device": [
                           {"device_id": str(d % 8), "device_ip": kvsim.device_ip(d),
                            "rank_id": str(i)}]} for i, d in enumerate(devices)]})


@pytest.fixture
def dists(world):
    p = make_dist(LLMRole.PROMPT, 1, 0, False, enable_switch_role=True)
    d = make_dist(LLMRole.DECODER, 2, 8, False, enable_switch_role=True)
    yield p, d
    p.finalize()
    d.finalize()


def test_domain_forms_after_both_link_and_pull_blocks_moves_the_bytes(dists):
    p, d = dists
    desc = CacheDesc(2, [8, 4096], DataType.DT_INT8)
    src = p.cache_manager.register_blocks_cache(desc, alloc_filled(0, desc), BlocksCacheKey(1, 0))
    dst = d.cache_manager.register_blocks_cache(desc, alloc_filled(8, desc))
    t0 = kvsim.now()
    p_id = p.link("pd", PD, rank_table(0, 8))
    assert p_id == 1 and kvsim.now() == t0  # returns at once
    assert p.query_register_mem_status(p_id) == RegisterMemStatus.PREPARING
    kvsim.sleep(1)
    assert p.query_register_mem_status(comm_id=p_id) == RegisterMemStatus.PREPARING
    d_id = d.link(comm_name="pd", cluster_rank_info=PD, rank_table=rank_table(0, 8))
    assert d.query_register_mem_status(d_id) == RegisterMemStatus.PREPARING
    kvsim.sleep(0.001)
    assert d.query_register_mem_status(d_id) == RegisterMemStatus.OK
    assert p.query_register_mem_status(p_id) == RegisterMemStatus.OK
    d.cache_manager.pull_blocks(BlocksCacheKey(1, 0), dst, [1, 2, 6], [0, 1, 7])
    for s, t in zip(src.tensor_addrs, dst.tensor_addrs):
        for sb, db in ((1, 0), (2, 1), (6, 7)):
            assert kvsim.read(s + sb * 4096, 4096) == kvsim.read(t + db * 4096, 4096)
    with pytest.raises(LLMException) as e:
        d.switch_role(LLMRole.PROMPT)
    assert e.value.status_code == LLMStatusCode.LLM_EXIST_LINK
    d.unlink(d_id)
    with pytest.raises(LLMException) as e:
        d.cache_manager.pull_blocks(BlocksCacheKey(1, 0), dst, [1], [0])
    assert e.value.status_code == LLMStatusCode.LLM_NOT_YET_LINK
    for call in (d.unlink, d.query_register_mem_status):
        with pytest.raises(LLMException) as e:
            call(d_id)
        assert e.value.status_code == LLMStatusCode.LLM_NOT_YET_LINK
    p.unlink(p_id)
    p.switch_role(LLMRole.DECODER)


def test_a_member_that_never_links_fails_after_link_total_time(world):
    p = make_dist(LLMRole.PROMPT, 1, 0, False, link_total_time=5)
    comm_id = p.link("pd", PD, rank_table(0, 8))
    kvsim.sleep(4.999)
    assert p.query_register_mem_status(comm_id) == RegisterMemStatus.PREPARING
    kvsim.sleep(0.002)
    assert p.query_register_mem_status(comm_id) == RegisterMemStatus.FAILED
    p.unlink(comm_id)
    p.finalize()


def test_link_marks_the_cache_manager_linked(dists):
    p, _ = dists
    p.link("pd", PD, rank_table(0, 8))
    desc = CacheDesc(1, [1, 4096], DataType.DT_INT8)
    p.cache_manager.register_cache(desc, alloc_filled(0, desc))  # defaults to not accessible
    with pytest.raises(LLMException) as e:
        p.cache_manager.register_cache(desc, alloc_filled(0, desc), remote_accessible=True)
    assert e.value.status_code == PARAM


CASES = [
    # (name, call(p), exception type, status code or None)
    ("comm_name not str", lambda p: p.link(1, PD, rank_table(0, 8)), TypeError, None),
    ("comm_name empty", lambda p: p.link("", PD, rank_table(0, 8)), LLMException, PARAM),
    ("comm_name of 128", lambda p: p.link("n" * 128, PD, rank_table(0, 8)), LLMException, PARAM),
    ("comm_name of 128 non-ASCII", lambda p: p.link("é" * 128, PD, rank_table(0, 8)),
     LLMException, PARAM),
    ("empty name before dict type", lambda p: p.link("", [1], 3), LLMException, PARAM),
    ("cluster_rank_info not dict", lambda p: p.link("pd", [(1, 0)], rank_table(0, 8)),
     TypeError, None),
    ("key not int", lambda p: p.link("pd", {"1": 0, 2: 1}, rank_table(0, 8)), TypeError, None),
    ("value not int", lambda p: p.link("pd", {1: 0.0, 2: 1}, rank_table(0, 8)), TypeError, None),
    ("five members", lambda p: p.link("pd", {i: i for i in range(1, 6)}, rank_table(0, 8)),
     LLMException, PARAM),
    ("five members before ranges", lambda p: p.link("pd", {-i: i for i in range(1, 6)}, 1),
     LLMException, PARAM),
    ("negative cluster id", lambda p: p.link("pd", {-1: 0, 1: 1}, rank_table(0, 8)),
     ValueError, None),
    ("cluster id over uint64", lambda p: p.link("pd", {2**64: 0, 1: 1}, rank_table(0, 8)),
     ValueError, None),
    ("rank over uint32", lambda p: p.link("pd", {1: 0, 2: 2**32}, rank_table(0, 8)),
     ValueError, None),
    ("rank_table not str", lambda p: p.link("pd", PD, {"version": "1.2"}), TypeError, None),
    ("one member", lambda p: p.link("pd", {1: 0}, rank_table(0, 8)), LLMException, PARAM),
    ("ranks not ordered", lambda p: p.link("pd", {2: 1, 1: 0}, rank_table(0, 8)),
     LLMException, PARAM),
    ("rank table not JSON", lambda p: p.link("pd", PD, "{"), LLMException, PARAM),
    ("rank table version", lambda p: p.link("pd", PD, rank_table(0, 8).replace("1.2", "1.9")),
     LLMException, PARAM),
    ("device_ip of no device", lambda p: p.link(
        "pd", PD, rank_table(0, 8).replace(kvsim.device_ip(8), "192.168.0.1")),
     LLMException, PARAM),
    ("own rank on another device", lambda p: p.link("pd", PD, rank_table(1, 8)),
     LLMException, PARAM),
    ("caller not a member", lambda p: p.link("pd", {3: 0, 2: 1}, rank_table(0, 8)),
     LLMException, PARAM),
    ("unlink comm_id not int", lambda p: p.unlink("1"), TypeError, None),
    ("unlink negative comm_id", lambda p: p.unlink(-1), ValueError, None),
    ("query comm_id not int", lambda p: p.query_register_mem_status(1.0), TypeError, None),
    ("query comm_id over uint64", lambda p: p.query_register_mem_status(2**64), ValueError, None),
    ("unlink unknown comm_id", lambda p: p.unlink(5), LLMException,
     LLMStatusCode.LLM_NOT_YET_LINK),
    ("query unknown comm_id", lambda p: p.query_register_mem_status(5), LLMException,
     LLMStatusCode.LLM_NOT_YET_LINK),
]


@pytest.mark.parametrize("name,call,exc,status", CASES, ids=[c[0] for c in CASES])
def test_validation(dists, name, call, exc, status):
    p, _ = dists
    with pytest.raises(exc) as e:
        call(p)
    assert type(e.value) is exc
    if status is not None:
        assert e.value.status_code == status
    # Nothing applied: registrations still default to remote-accessible, the next id is 1.
    desc = CacheDesc(1, [1, 4096], DataType.DT_INT8)
    p.cache_manager.register_cache(desc, alloc_filled(0, desc), remote_accessible=True)
    assert p.link("pd", PD, rank_table(0, 8)) == 1


def test_before_init_and_under_v1(world):
    from llm_datadist import LLMDataDist
    early = LLMDataDist(LLMRole.PROMPT, 1)
    for call in (lambda: early.link("pd", PD, "{}"), lambda: early.unlink(1),
                 lambda: early.query_register_mem_status(1)):
        with pytest.raises(RuntimeError):
            call()
    v1 = make_dist(LLMRole.DECODER, 1, 0, False, enable_cache_manager=False)
    for name, call in (("link", lambda: v1.link(1, 2, 3)), ("unlink", lambda: v1.unlink("x")),
                       ("query_register_mem_status", lambda: v1.query_register_mem_status("x"))):
        with pytest.raises(LLMException) as e:
            call()
        assert e.value.status_code == PARAM
        assert "is not supported when llm.EnableCacheManager is not configured." in str(e.value)
        assert name in str(e.value)
    v1.finalize()


def test_comm_name_length_counts_characters(dists):
    p, d = dists
    name = "é" * 127  # 254 UTF-8 bytes, 127 characters: accepted
    assert p.link(name, PD, rank_table(0, 8)) == 1
    assert d.link(name, PD, rank_table(0, 8)) == 1
    kvsim.sleep(0.001)
    assert d.query_register_mem_status(1) == RegisterMemStatus.OK
