"""Python synchronizers and jobs that block in simulated time (per-job thread states), and the
overlap of layer-wise transfer with a simulated prefill (spec 8)."""
import pytest

import kvsim
from llm_datadist import (CacheDesc, DataType, LayerSynchronizer, LLMStatusCode,
                          TransferConfig)

from conftest import alloc_filled

US = 1_000_000  # ps


class EventSync(LayerSynchronizer):
    def __init__(self, events, raise_at=None):
        self.events = events
        self.raise_at = raise_at
        self.times = []

    def synchronize_layer(self, layer_index, timeout_in_millis):
        self.events[layer_index].wait()
        self.times.append(kvsim.now_ps())
        if layer_index == self.raise_at:
            raise KeyError("model step failed")
        return True


def caches(pair, layers, row_bytes=256 * 1024):
    desc = CacheDesc(2 * layers, [1, row_bytes], DataType.DT_INT8)
    src = pair.p.cache_manager.register_cache(desc, alloc_filled(0, desc))
    dst = pair.d.cache_manager.register_cache(desc, alloc_filled(8, desc))
    return desc, src, dst


def layer_time(pair, src, dst):
    """Simulated time of one layer on the idle path, measured with an always-ready sync."""
    events = [kvsim.Event()]
    events[0].set()
    start = kvsim.now_ps()
    task = pair.p.cache_manager.transfer_cache_async(
        src, EventSync(events), [TransferConfig(2, dst.tensor_addrs[:2], range(0, 1))])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    return kvsim.now_ps() - start


@pytest.mark.parametrize("compute_over_transfer", [1.0, 1.5, 3.0])
def test_transfer_overlaps_the_prefill(pair, compute_over_transfer):
    layers = 40
    desc, src, dst = caches(pair, layers)
    transfer = layer_time(pair, src, dst)
    compute = int(transfer * compute_over_transfer)
    events = [kvsim.Event() for _ in range(layers)]
    computed = []

    def prefill():
        for layer in range(layers):
            kvsim.sleep(compute * 1e-12)
            computed.append(kvsim.now_ps())
            events[layer].record()

    start = kvsim.now_ps()
    job = kvsim.spawn(prefill, "prefill")
    sync = EventSync(events)
    task = pair.p.cache_manager.transfer_cache_async(src, sync,
                                                     [TransferConfig(2, dst.tensor_addrs)])
    assert task.get_results() == [LLMStatusCode.LLM_SUCCESS]
    end = kvsim.now_ps()
    assert job.done and job.exception is None
    assert computed[-1] - start == layers * compute
    assert sync.times == computed  # each layer released the moment it is computed
    exposed = end - computed[-1]
    assert transfer <= exposed <= 1.05 * transfer  # only the last layer is not hidden
    assert end - start < layers * compute + layers * transfer  # strictly better than serial
    for s, d in zip(src.tensor_addrs, dst.tensor_addrs):
        assert kvsim.read(s, desc.size) == kvsim.read(d, desc.size)


def test_exception_in_synchronizer_ends_the_task_with_none_and_a_diagnostic(pair, capsys):
    desc, src, dst = caches(pair, 6, 4096)
    events = [kvsim.Event() for _ in range(6)]

    def prefill():
        for e in events:
            kvsim.sleep(10e-6)
            e.set()

    kvsim.spawn(prefill)
    before = [kvsim.read(a, desc.size) for a in dst.tensor_addrs]
    task = pair.p.cache_manager.transfer_cache_async(
        src, EventSync(events, raise_at=2), [TransferConfig(2, dst.tensor_addrs)])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS  # None results are skipped (3.2)
    assert task.get_results() == [None]
    assert [d.kind for d in task.diagnostics] == ["SrcLayerRangeMutated",
                                                  "SynchronizerException"]
    assert "KeyError: 'model step failed'" in task.diagnostics[1].message
    assert any(d.kind == "SynchronizerException" for d in kvsim.diagnostics())
    assert "Traceback" in capsys.readouterr().err
    # Layers 0 and 1 went out; 2 and later did not.
    for i, (s, d) in enumerate(zip(src.tensor_addrs, dst.tensor_addrs)):
        expected = kvsim.read(s, desc.size) if i < 4 else before[i]
        assert kvsim.read(d, desc.size) == expected


def test_stress_many_tasks_jobs_nested_calls_and_exceptions(pair):
    layers = 64
    desc, src, dst = caches(pair, layers, 2048)
    rounds = 5
    for r in range(rounds):
        events = [kvsim.Event() for _ in range(layers)]
        trace = []

        def nested(depth, layer):
            if depth == 0:
                kvsim.sleep(1e-7)  # suspend deep inside nested Python frames
                return layer
            try:
                return nested(depth - 1, layer)
            finally:
                trace.append(depth)

        class Sync(LayerSynchronizer):
            def synchronize_layer(self, layer_index, timeout_in_millis):
                events[layer_index].wait()
                assert nested(5, layer_index) == layer_index
                try:
                    raise ValueError(layer_index)
                except ValueError as e:
                    assert e.args == (layer_index,)
                return True

        def prefill(first):
            for layer in range(first, layers, 2):
                kvsim.sleep(2e-6)
                events[layer].set()

        def failing():
            kvsim.sleep(1e-6)
            raise RuntimeError("job failed")

        jobs = [kvsim.spawn(lambda: prefill(0)), kvsim.spawn(lambda: prefill(1)),
                kvsim.spawn(failing, "failing")]
        task = pair.p.cache_manager.transfer_cache_async(
            src, Sync(), [TransferConfig(2, dst.tensor_addrs, range(0, layers))])
        assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
        assert all(j.join() for j in jobs)
        assert isinstance(jobs[2].exception, RuntimeError)
        assert len(trace) == 5 * layers
    for s, d in zip(src.tensor_addrs, dst.tensor_addrs):
        assert kvsim.read(s, desc.size) == kvsim.read(d, desc.size)


def test_events_and_sleep_on_the_script_run_the_simulation(world):
    event = kvsim.Event()
    start = kvsim.now_ps()
    assert event.wait(timeout=5e-6) is False
    assert kvsim.now_ps() - start == 5 * US

    def setter():
        kvsim.sleep(3e-6)
        event.set()

    kvsim.spawn(setter)
    assert event.wait() is True
    assert kvsim.now_ps() - start == 8 * US
    kvsim.sleep(2e-6)
    assert kvsim.now_ps() - start == 10 * US
    assert event.wait() is True and event.is_set()
