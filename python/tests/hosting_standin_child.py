"""Run by test_hosting_torch_standin.py in a child interpreter with KVSIM_TORCH=standin.

Reads {"reprs": [expr, ...], "bf16": [float, ...]} on stdin; writes on stdout
{"reprs": [repr(eval(expr)), ...], "bf16": [bits, ...], "checks": {name: "ok" | traceback}}.
"""
import ctypes
import gc
import json
import sys
import traceback

import numpy as np

from kvsim.hosting import context, npu, torch_support

STANDIN = torch_support.install()
import torch  # noqa: E402  (the stand-in, after install())

import kvsim  # noqa: E402
from kvsim.hosting.npu_tensor import NpuTensor  # noqa: E402
from llm_datadist import (CacheDesc, DataType, LayerSynchronizer, LLMClusterInfo,  # noqa: E402
                          LLMConfig, LLMDataDist, LLMRole, LLMStatusCode, TransferConfig)

TiB = 1 << 40
DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
          "int64", "bool"]


def hbm_of(addr):
    return addr // TiB - 1


def activate(visible, node=0, name="p0", rank=0):
    context._active = context.ProcessContext(
        name=name, rank=rank, node=node, visible_devices=visible,
        node_devices=list(range(8 * node, 8 * node + 8)), host_ip="192.168.0.1", pid=1000 + rank)


def check_flavour():
    assert STANDIN is False and torch_support.use_real_torch() is False
    assert torch._KVSIM_STANDIN and "site_notorch" in torch.__file__
    assert torch.npu is npu and sys.modules["torch.npu"] is npu
    import torch_npu
    assert torch_npu.npu is npu
    assert isinstance(torch.device("npu:1"), torch.device) and str(torch.device("npu", 1)) == \
        "npu:1"
    assert isinstance(torch.device("cpu"), torch.device) and repr(torch.device("cpu")) == \
        "device(type='cpu')"
    assert torch.cuda.is_available() is False


def check_dtypes():
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1,
             "int16": 2, "int32": 4, "int64": 8, "bool": 1}
    for name, size in sizes.items():
        assert getattr(torch, name).itemsize == size, name
        assert torch.zeros(3, dtype=getattr(torch, name)).element_size() == size
    assert torch.float is torch.float32 and torch.half is torch.float16
    assert torch.double is torch.float64 and torch.long is torch.int64 and torch.int is torch.int32
    assert repr(torch.bfloat16) == "torch.bfloat16"
    assert torch.tensor([1, 2]).dtype is torch.int64 and torch.tensor([1.0]).dtype is torch.float32
    assert torch.tensor(np.arange(3, dtype=np.int16)).dtype is torch.int16
    b = torch.tensor([1.0, 3.140625, -2.5], dtype=torch.bfloat16)
    assert b.view(torch.int16).tolist() == [0x3F80, 0x4049, -16352]  # 0xC020 as int16
    assert b.float().tolist() == [1.0, 3.140625, -2.5]


def check_cpu_tensor_memory():
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    ptr = t.data_ptr()
    assert ptr == t.numpy().__array_interface__["data"][0]
    assert ctypes.string_at(ptr, 48) == np.arange(12, dtype=np.int32).tobytes()
    row = t[1]
    assert row.data_ptr() == ptr + 16 and row.is_contiguous()
    row.fill_(-1)
    assert t.tolist()[1] == [-1, -1, -1, -1]
    col = t[:, 2]
    assert col.stride() == (4,) and not col.is_contiguous()
    col += 100
    assert t[2, 2].item() == 110 and t[1, 2].item() == 99
    assert t.t().stride() == (1, 4) and t.view(-1).shape == torch.Size([12])
    try:
        t.t().view(-1)
        raise AssertionError("view of a transposed tensor must fail")
    except RuntimeError:
        pass
    r = torch.rand(size=(2, 1024), dtype=torch.float32, device="cpu")
    assert r.data_ptr() != 0 and r.shape == torch.Size([2, 1024])
    assert float(r.min()) >= 0.0 and float(r.max()) < 1.0


def check_npu_round_trip():
    for name in DTYPES:
        dt = getattr(torch, name)
        src = (torch.randn(3, 5) * 100).to(dt)
        t = src.npu()
        assert isinstance(t, NpuTensor) and isinstance(t, torch.Tensor) and t.dtype is dt
        assert str(t.device) == "npu:0" and hbm_of(t.data_ptr()) == 0
        assert kvsim.read(t.data_ptr(), t.nbytes) == np.ascontiguousarray(src._a).tobytes(), name
        back = t.cpu()
        assert type(back) is torch.Tensor and torch.equal(back, src), name
    h = torch.ones(*[2, 16 * 1024], dtype=torch.float16).npu()
    assert kvsim.read(h.data_ptr() + 65534, 2) == np.float16(1).tobytes()
    assert repr(torch.ones(2, 2).npu()) == ("tensor([[1., 1.],\n"
                                           "        [1., 1.]], device='npu:0')")


def check_npu_in_place_and_views():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).npu()
    base = t.data_ptr()
    t.add_(1)
    t *= 2
    t[1] = 7
    t[:, 2] += 100
    t[2].fill_(-1)
    expect = (np.arange(12, dtype=np.float32).reshape(3, 4) + 1) * 2
    expect[1] = 7
    expect[:, 2] += 100
    expect[2] = -1
    assert kvsim.read(base, 48) == expect.tobytes()
    k, v = t.unbind(0)[:2]
    assert v.data_ptr() == base + 16
    assert str((t.sum(1)).device) == "npu:0" and t.sum(1).tolist() == expect.sum(1).tolist()
    assert torch.equal(torch.cat([t, t]).cpu(), torch.cat([t.cpu(), t.cpu()]))


def check_device_rules():
    a = torch.ones(3, device="npu:0")
    for bad in (lambda: a + torch.ones(3), lambda: torch.ones(3) + a,
                lambda: torch.cat([a, torch.ones(3, device="npu:1")])):
        try:
            bad()
            raise AssertionError("mixing devices must fail")
        except RuntimeError as e:
            assert "Expected all tensors to be on the same device" in str(e)
    assert (a + torch.tensor(2.0)).tolist() == [3.0, 3.0, 3.0]
    assert torch.equal(a, torch.ones(3)) and not torch.equal(a, torch.zeros(3))
    c = torch.zeros(3)
    c.copy_(a)
    assert c.tolist() == [1.0, 1.0, 1.0]


def check_set_device_of_a_process():
    try:
        activate([9, 10, 12], node=1)
        assert torch.npu.device_count() == 3
        torch.npu.set_device(2)
        t = torch.zeros(4, device="npu")
        assert t.world_device == 12 and hbm_of(t.data_ptr()) == hbm_of(kvsim.alloc(12, 1)) == 12
        assert torch.ones(2).to("npu:1").world_device == 10
        try:
            torch.npu.set_device(3)
            raise AssertionError("device 3 is not visible")
        except RuntimeError as e:
            assert "Invalid device ID" in str(e)
    finally:
        context._active = None
    torch.npu.set_device(5)
    assert torch.zeros(1, device="npu").world_device == 5
    torch.npu.set_device(0)


def check_rng_is_seeded_per_process():
    first = np.random.Generator(np.random.PCG64(0)).random(4, dtype=np.float32)
    try:
        activate([0], name="a", rank=0)
        a = torch.rand(4)
        activate([1], name="b", rank=1)
        b = torch.rand(4)
        torch.manual_seed(5)
        c = torch.rand(4)
        assert torch.initial_seed() == 5
    finally:
        context._active = None
    assert a.tolist() == b.tolist() == first.tolist()
    assert c.tolist() != a.tolist()
    torch.manual_seed(0)
    assert torch.rand(4).tolist() == first.tolist()
    torch.manual_seed(1)
    x = torch.randint(0, 10, (5,))
    torch.manual_seed(1)
    assert torch.randint(0, 10, (5,)).tolist() == x.tolist() and x.dtype is torch.int64


def check_distributed_placeholder():
    import importlib.util
    import torch.distributed as dist
    if importlib.util.find_spec("kvsim.hosting.distributed") is not None:
        return  # the real module exists: its own tests cover it
    assert dist.is_available() is False
    try:
        dist.init_process_group("hccl")
        raise AssertionError("must raise ImportError")
    except ImportError as e:
        assert "torch.distributed" in str(e)


def check_memory_freed():
    t = torch.zeros(1000, device="npu:6")
    addr = t.data_ptr()
    assert torch.npu.memory_allocated(6) == 4000
    del t
    gc.collect()
    assert torch.npu.memory_allocated(6) == 0 and kvsim.alloc(6, 1) == addr


class _Sync(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


def _dist(role, cluster, device, listen):
    d, cfg = LLMDataDist(role, cluster), LLMConfig()
    cfg.device_id = device
    cfg.enable_cache_manager = True
    if listen:
        cfg.listen_ip_info = f"{kvsim.host_ip(kvsim.node_of(device))}:26000"
    d.init(cfg.generate_options())
    return d


def check_llm_datadist_transfer():
    prompt, decoder = _dist(LLMRole.PROMPT, 1, 0, False), _dist(LLMRole.DECODER, 2, 8, True)
    info = LLMClusterInfo()
    info.remote_cluster_id = 2
    info.append_local_ip_info(kvsim.host_ip(0), 0)
    info.append_remote_ip_info(kvsim.host_ip(1), 26000)
    assert prompt.link_clusters([info])[0] == LLMStatusCode.LLM_SUCCESS
    src = [torch.rand(1, 2048, dtype=torch.float16).npu() for _ in range(4)]
    dst = [torch.zeros(1, 2048, dtype=torch.float16, device="npu:8") for _ in range(4)]
    desc = CacheDesc(4, [1, 2048], DataType.DT_FLOAT16)
    kv = prompt.cache_manager.register_cache(desc, [int(t.data_ptr()) for t in src])
    dst_addrs = decoder.cache_manager.register_cache(desc, [t.data_ptr() for t in dst]).tensor_addrs
    task = prompt.cache_manager.transfer_cache_async(kv, _Sync(),
                                                     [TransferConfig(2, dst_addrs, range(2), 0)])
    assert task.synchronize() == LLMStatusCode.LLM_SUCCESS
    for s, d in zip(src, dst):
        assert torch.equal(s.cpu(), d.cpu())
    prompt.finalize()
    decoder.finalize()


def main():
    request = json.load(sys.stdin)
    out = {"reprs": [], "bf16": [], "checks": {}}
    for expr in request["reprs"]:
        try:
            out["reprs"].append(repr(eval(expr, {"torch": torch})))
        except Exception as e:  # the parent reports which expression failed
            out["reprs"].append(f"ERROR {type(e).__name__}: {e}")
    values = np.array(request["bf16"], dtype=np.float32)
    bits = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).tolist()
    out["bf16"] = [b & 0xFFFF for b in bits]
    kvsim.World("atlas-a2")
    for name, fn in sorted(globals().items()):
        if name.startswith("check_"):
            try:
                fn()
                out["checks"][name] = "ok"
            except Exception:
                out["checks"][name] = traceback.format_exc()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
