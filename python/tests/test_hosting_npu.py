"""NPU tensors and the NPU runtime with the real torch (kvsim.hosting): bytes in simulated HBM,
views, device rules, logical-to-world device mapping, and llm_datadist transfers between them."""
import gc
import pickle

import numpy as np
import pytest

import kvsim
from kvsim.hosting import context, npu, torch_support
from llm_datadist import CacheDesc, DataType, LayerSynchronizer, LLMRole, LLMStatusCode, \
    TransferConfig

from conftest import cluster_info, make_dist

torch_support.install()
import torch  # noqa: E402

from kvsim.hosting.npu_tensor import NpuTensor  # noqa: E402

TiB = 1 << 40


def hbm_of(addr):
    """World device whose HBM holds addr (device d's HBM starts at (d+1) TiB)."""
    return addr // TiB - 1


def raw(t):
    """The bytes of a CPU tensor."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.fixture
def process():
    """Activate a process context as the launcher does; restore the script's afterwards."""
    def activate(visible, node=0, name="p0", rank=0):
        ctx = context.ProcessContext(name=name, rank=rank, node=node, visible_devices=visible,
                                     node_devices=list(range(8 * node, 8 * node + 8)),
                                     host_ip=f"192.168.0.{node + 1}", pid=1000 + rank)
        context._active = ctx
        return ctx
    yield activate
    context._active = None


def test_install_gives_torch_npu_and_the_shims(world):
    assert torch.npu is npu
    import torch_npu
    assert torch_npu.npu is npu
    import torchair
    with pytest.raises(NotImplementedError, match="not simulated by kvsim"):
        torchair.get_npu_backend(compiler_config=None)
    assert torch.npu.is_available() and torch.npu.device_count() == world.device_count == 16
    assert torch.npu.get_device_name() == "Ascend910B3"


def _python(code, **env):
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1", **env),
                          timeout=120)


def test_torch_is_imported_and_patched_only_when_the_program_imports_it():
    code = ("import sys\n"
            "from kvsim.hosting import torch_support, npu, npu_tensor\n"
            "torch_support.install(); torch_support.install()\n"
            "assert 'torch' not in sys.modules, 'install() must not import torch'\n"
            "import torch\n"
            "assert torch.npu is npu\n"
            "assert type(torch.ones(2).npu()) is npu_tensor.NpuTensor\n"
            "print('ok')\n")
    r = _python(code, KVSIM_TORCH="real")
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    for mode in ("cuda", "standin"):  # the numpy stand-in is gone
        r = _python("from kvsim.hosting import torch_support; torch_support.install()",
                    KVSIM_TORCH=mode)
        assert r.returncode != 0 and f"KVSIM_TORCH='{mode}'" in r.stderr


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint8",
                                   "int16", "int32", "int64", "bool"])
def test_round_trip_is_byte_exact(world, dtype):
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(7)
    src = (torch.randn(3, 5, generator=gen) * 100).to(dt)
    t = src.npu()
    assert isinstance(t, NpuTensor) and t.dtype == dt and t.shape == torch.Size([3, 5])
    assert str(t.device) == "npu:0" and t.world_device == 0 and hbm_of(t.data_ptr()) == 0
    assert t.nbytes == 15 * src.element_size()
    assert kvsim.read(t.data_ptr(), t.nbytes) == raw(src)
    back = t.cpu()
    assert type(back) is torch.Tensor and back.dtype == dt and torch.equal(back, src)
    assert raw(back) == raw(src)


def test_device_bytes_written_directly_are_seen(world):
    t = torch.zeros(4, dtype=torch.float16, device="npu")
    kvsim.write(t.data_ptr() + 2, np.array([1.5, -2.0], dtype=np.float16))
    assert t.cpu().tolist() == [0.0, 1.5, -2.0, 0.0]
    b = torch.empty(2, dtype=torch.bfloat16, device="npu")
    kvsim.write(b.data_ptr(), np.array([0x3FC0, 0xC040], dtype=np.uint16))  # 1.5, -3.0
    assert b.cpu().tolist() == [1.5, -3.0]


def test_in_place_ops_and_views_write_back(world):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).npu()
    base = t.data_ptr()
    t.add_(1)
    t *= 2
    t[1] = 7
    t[:, 2] += 100
    row = t[2]
    assert row.data_ptr() == base + 2 * 4 * 4  # a view, as in torch
    row.fill_(-1)
    expect = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1) * 2
    expect[1] = 7
    expect[:, 2] += 100
    expect[2] = -1
    assert kvsim.read(base, 48) == raw(expect)
    col = t.t()[1]  # non-contiguous view: read-modify-write of its span
    assert not t.t().is_contiguous() and col.stride() == (4,)
    col.zero_()
    expect[:, 1] = 0
    assert torch.equal(t.cpu(), expect)
    with pytest.raises(NotImplementedError):
        t.unsqueeze_(0)


def test_views_share_memory_like_torch(world):
    t = torch.zeros(2, 3, 4, dtype=torch.int32, device="npu:1")
    assert t.world_device == 1 and hbm_of(t.data_ptr()) == 1
    k, v = t.unbind(0)
    assert k.data_ptr() == t.data_ptr() and v.data_ptr() == t.data_ptr() + 48
    v.copy_(torch.arange(12, dtype=torch.int32).reshape(3, 4))
    assert t[1, 2, 2].item() == 10 and t.view(-1)[12:].tolist() == list(range(12))
    parts = t.view(6, 4).split(2)
    assert [p.data_ptr() - t.data_ptr() for p in parts] == [0, 32, 64]
    assert t.permute(2, 0, 1).stride() == (1, 12, 4) and t.flatten().shape == torch.Size([24])
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.transpose(0, 2).view(-1)
    c = t.transpose(0, 2).contiguous()
    assert c.data_ptr() != t.data_ptr()
    assert torch.equal(c.cpu(), t.cpu().transpose(0, 2))


def test_repr_as_torch_npu_prints(world):
    assert repr(torch.ones(2, 2).npu()) == ("tensor([[1., 1.],\n"
                                           "        [1., 1.]], device='npu:0')")
    h = torch.tensor([1.5, -2.0], dtype=torch.float16).to("npu:3")
    assert repr(h) == "tensor([ 1.5000, -2.0000], device='npu:3', dtype=torch.float16)"
    assert repr(torch.zeros(0, 3, device="npu")) == "tensor([], device='npu:0', size=(0, 3))"
    assert f"{torch.tensor(2.5).npu():.1f}" == "2.5"


def test_fallback_ops_return_npu_tensors(world):
    a = torch.arange(6, dtype=torch.float32, device="npu:2").reshape(2, 3)
    s = a.sum(dim=1)
    assert isinstance(s, NpuTensor) and str(s.device) == "npu:2" and s.tolist() == [3.0, 12.0]
    assert (a * 2 + 1).max().item() == 11.0
    assert isinstance(a.float(), NpuTensor) and str(a.half().device) == "npu:2"
    assert torch.equal(torch.cat([a, a]).cpu(), torch.cat([a.cpu(), a.cpu()]))
    assert str(torch.cat([a, a]).device) == "npu:2"
    assert str(torch.zeros_like(a).device) == "npu:2"
    assert type(torch.zeros_like(a, device="cpu")) is torch.Tensor
    assert (a > 2).dtype == torch.bool and (a > 2).sum().item() == 3
    assert a.numel() == 6 and len(a) == 2 and a.T.shape == torch.Size([3, 2])
    with pytest.raises(TypeError, match="can't convert npu:2 device type tensor to numpy"):
        a.numpy()


def test_device_rules_follow_torch(world):
    a = torch.ones(3, device="npu:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3) + a
    with pytest.raises(RuntimeError, match="npu:0 and npu:1"):
        torch.cat([a, torch.ones(3, device="npu:1")])
    assert (a + torch.tensor(2.0)).tolist() == [3.0, 3.0, 3.0]  # 0-dim CPU tensors mix
    assert torch.equal(a, torch.ones(3)) and not torch.equal(a, torch.zeros(3))
    cpu = torch.zeros(3)
    cpu.copy_(a)
    assert cpu.tolist() == [1.0, 1.0, 1.0]


def test_to_and_factories_accept_npu_devices(world):
    c = torch.arange(4, dtype=torch.int64)
    for dev, world_dev in (("npu:1", 1), (torch.device("npu:2"), 2), (3, 3)):
        t = c.to(dev)
        assert isinstance(t, NpuTensor) and t.world_device == world_dev
        assert hbm_of(t.data_ptr()) == world_dev and t.tolist() == [0, 1, 2, 3]
    moved = c.to("npu:1").to("npu:5", torch.float16)
    assert moved.world_device == 5 and moved.dtype == torch.float16
    assert type(moved.to("cpu")) is torch.Tensor and moved.to("cpu").tolist() == [0, 1, 2, 3]
    for make in (lambda d: torch.zeros(2, 3, device=d), lambda d: torch.ones(2, 3, device=d),
                 lambda d: torch.full((2, 3), 4, device=d), lambda d: torch.empty(2, 3, device=d),
                 lambda d: torch.rand(2, 3, device=d), lambda d: torch.arange(6, device=d),
                 lambda d: torch.tensor([[1, 2]], device=d), lambda d: torch.eye(3, device=d)):
        t = make("npu:4")
        assert isinstance(t, NpuTensor) and t.world_device == 4
    assert torch.full((2,), 4, device="npu").tolist() == [4, 4]
    assert torch.full((2,), 4, device="npu").dtype == torch.int64
    assert torch.ones(2, 3, device="npu:4").cpu().sum().item() == 6


def test_torch_device_replacement(world):
    d = torch.device("npu:1")
    assert isinstance(d, torch.device) and d.type == "npu" and d.index == 1 and str(d) == "npu:1"
    assert repr(torch.device("npu", 2)) == "device(type='npu', index=2)"
    cpu = torch.device("cpu")
    assert isinstance(cpu, torch.device) and type(cpu) is torch._C.device
    assert pickle.loads(pickle.dumps(cpu)) == cpu
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.device("npu:x")


def test_set_device_maps_logical_ids_in_a_script(world):
    torch.npu.set_device("npu:3")
    try:
        assert torch.npu.current_device() == 3
        t = torch.zeros(8, device="npu")
        assert t.world_device == 3 and str(t.device) == "npu:3"
        assert hbm_of(t.data_ptr()) == hbm_of(kvsim.alloc(3, 1)) == 3
        with pytest.raises(RuntimeError, match="Invalid device ID"):
            torch.npu.set_device(16)
        torch.npu.set_device(-1)  # ignored, as torch_npu does
        assert torch.npu.current_device() == 3
        with pytest.raises(ValueError, match="Expected a npu device"):
            torch.npu.set_device("cpu")
    finally:
        torch.npu.set_device(0)


def test_set_device_maps_logical_ids_of_a_process(world, process):
    process([9, 10, 12], node=1)
    assert torch.npu.device_count() == 3 and torch.npu.current_device() == 0
    assert torch.ones(2).npu().world_device == 9
    torch.npu.set_device(2)
    t = torch.ones(2, 2).npu()
    assert str(t.device) == "npu:2" and t.world_device == 12 and hbm_of(t.data_ptr()) == 12
    assert torch.ones(1, device="npu:1").world_device == 10
    with pytest.raises(RuntimeError, match="Invalid device ID"):
        torch.npu.set_device(3)
    process([0, 1], node=0, name="p1", rank=1)  # another process: its own current device
    assert torch.npu.current_device() == 0 and torch.ones(1).npu().world_device == 0
    with torch.npu.device(1):
        assert torch.ones(1).npu().world_device == 1
    assert torch.npu.current_device() == 0


def test_memory_is_freed_when_tensors_are_collected(world):
    t = torch.zeros(1000, device="npu:6")
    addr = t.data_ptr()
    assert torch.npu.memory_allocated(6) == 4000
    view = t[10:]
    del t
    gc.collect()
    assert torch.npu.memory_allocated(6) == 4000  # the view keeps the buffer
    del view
    gc.collect()
    assert torch.npu.memory_allocated(6) == 0
    assert kvsim.alloc(6, 4096) == addr  # the same range is free again


def test_tensors_of_a_replaced_world_refuse_use(world):
    t = torch.arange(4, device="npu:1")
    kvsim.World("atlas-a2")
    same = kvsim.alloc(1, 64)
    assert same == t.data_ptr()  # the new world reuses the address
    with pytest.raises(RuntimeError, match="world that was replaced"):
        t.cpu()
    with pytest.raises(RuntimeError, match="world that was replaced"):
        t.fill_(1)
    assert t.shape == torch.Size([4])  # metadata stays readable
    del t
    gc.collect()  # collecting it must not free the new world's allocation
    assert torch.npu.memory_allocated(1) == 0
    assert kvsim.free(same)


def test_mem_get_info_events_and_streams(world):
    free0, total = torch.npu.mem_get_info(7)
    assert total == 64 << 30 and free0 == total
    t = torch.zeros(10, device="npu:7")
    assert torch.npu.mem_get_info(7) == (total - (2 << 20), total)
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    start.record()
    kvsim.sleep(0.0025)
    end.record(torch.npu.current_stream())
    end.synchronize()
    assert start.query() and end.elapsed_time(start) == pytest.approx(-2.5)
    assert start.elapsed_time(end) == pytest.approx(2.5)
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.npu.Event().elapsed_time(end)
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() is s
    assert torch.npu.current_stream() is torch.npu.default_stream()
    torch.npu.synchronize()
    del t


class _Synchronizer(LayerSynchronizer):
    def __init__(self, events):
        super().__init__()
        self.events = events

    def synchronize_layer(self, layer_index, timeout_in_millis):
        self.events[layer_index].synchronize()
        return True


def test_llm_datadist_transfers_between_npu_tensors(world):
    """The hicann samples' pattern: tensors made with torch on the NPU, registered by
    data_ptr(), sent layer by layer, checked with .cpu() and torch.equal."""
    layers, shape = 4, (1, 8, 1024)  # batch dimension first: TransferConfig sends batch 0
    prompt = make_dist(LLMRole.PROMPT, 1, 0, False)
    decoder = make_dist(LLMRole.DECODER, 2, 8, True)
    ret, _ = prompt.link_clusters([cluster_info(2, 8)])
    assert ret == LLMStatusCode.LLM_SUCCESS
    torch.manual_seed(3)
    src = [torch.rand(*shape, dtype=torch.float32).to(torch.bfloat16).npu()
           for _ in range(2 * layers)]
    dst = [torch.zeros(*shape, dtype=torch.bfloat16, device="npu:8") for _ in range(2 * layers)]
    assert all(t.world_device == 8 for t in dst)
    desc = CacheDesc(2 * layers, list(shape), DataType.DT_BF16)
    kv = prompt.cache_manager.register_cache(desc, [int(t.data_ptr()) for t in src])
    dst_cache = decoder.cache_manager.register_cache(desc, [t.data_ptr() for t in dst])
    events = [torch.npu.Event() for _ in range(layers)]
    for e in events:
        e.record()
    task = prompt.cache_manager.transfer_cache_async(
        kv, _Synchronizer(events), [TransferConfig(2, dst_cache.tensor_addrs, range(layers), 0)])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    assert task.get_results() == [LLMStatusCode.LLM_SUCCESS]
    for s, d in zip(src, dst):
        assert torch.equal(s.cpu(), d.cpu())
    assert not torch.equal(src[0].cpu(), src[1].cpu())
    prompt.finalize()
    decoder.finalize()
