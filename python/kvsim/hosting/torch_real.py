"""NPU support patched into a real torch (torch_npu's Python surface on kvsim's NPU runtime).

``patch(torch)`` adds ``torch.npu`` (kvsim.hosting.npu), ``Tensor.npu``, NPU targets for
``Tensor.to`` and for the factories' ``device=``, and a ``torch.device`` that also makes NPU
devices. NPU tensors are kvsim.hosting.npu_tensor.NpuTensor objects: not torch.Tensor
subclasses, but torch functions given one run on CPU copies through ``__torch_function__``.
Installed by kvsim.hosting.torch_support when torch is imported.
"""
import copyreg
import functools
import sys

from kvsim.hosting import npu, npu_tensor
from kvsim.hosting.npu_tensor import NpuTensor, join_repr

_FACTORIES = ("tensor", "as_tensor", "zeros", "ones", "full", "empty", "rand", "randn",
              "randint", "randperm", "arange", "eye", "linspace", "logspace", "empty_strided",
              "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
              "randint_like")
_FILLS = {"zeros": 0, "ones": 1, "zeros_like": 0, "ones_like": 1}
_EMPTY = ("empty", "empty_like", "empty_strided")


class RealBackend:
    """Real torch CPU tensors, as NPU tensors need them."""

    def __init__(self, torch):
        self.torch = torch
        self.tensor_type = torch.Tensor
        self._itemsize = {}
        self._real_device = torch._C.device

    def is_tensor(self, x):
        return isinstance(x, self.torch.Tensor)

    def is_dtype(self, x):
        return isinstance(x, self.torch.dtype)

    def itemsize(self, dtype):
        if dtype not in self._itemsize:
            self._itemsize[dtype] = self.torch.empty((), dtype=dtype).element_size()
        return self._itemsize[dtype]

    def is_integral(self, dtype):
        return not (dtype.is_floating_point or dtype.is_complex)

    def shape_of(self, t):
        return tuple(t.shape)

    def dtype_of(self, t):
        return t.dtype

    def size(self, shape):
        return self.torch.Size(shape)

    def from_bytes(self, data, dtype, shape):
        if not data:
            return self.torch.empty(shape, dtype=dtype)
        return self.torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)

    def to_bytes(self, t):
        t = t.detach().resolve_conj().resolve_neg().contiguous()
        return t.reshape(-1).view(self.torch.uint8).numpy().tobytes()

    def full(self, shape, value, dtype):
        return self.torch.full(shape, value, dtype=dtype)

    def as_tensor(self, value, dtype):
        return self.torch.as_tensor(value, dtype=dtype)

    def type_name(self, dtype):
        return self.torch.empty((), dtype=dtype).type().rsplit(".", 1)[-1]

    def device_type(self, dev):
        return self._real_device(dev).type if isinstance(dev, str) else dev.type

    def format(self, cpu, device_str):
        torch = self.torch
        from torch import _tensor_str
        suffixes = [f"device='{device_str}'"]
        if cpu.numel() == 0:
            if cpu.dim() != 1:
                suffixes.append("size=" + str(tuple(cpu.shape)))
            if cpu.dtype != torch.get_default_dtype():
                suffixes.append("dtype=" + str(cpu.dtype))
            body = "[]"
        else:
            if cpu.dtype not in (torch.get_default_dtype(), torch.int64, torch.bool):
                suffixes.append("dtype=" + str(cpu.dtype))
            body = _tensor_str._tensor_str(cpu, 7)
        return join_repr(body, suffixes, 7, _tensor_str.PRINT_OPTS.linewidth)


def _npu_index(dev):
    """Logical NPU index a device argument names (int N counts as npu:N), or None."""
    if dev is None:
        return None
    parsed = npu.parse_device(dev)
    if parsed is None:
        return None
    return npu._check(npu.current_device() if parsed.index is None else parsed.index)


def _make_device_class(real_device):
    class _DeviceMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, (real_device, npu.NpuDevice))

        def __subclasscheck__(cls, sub):
            return issubclass(sub, (real_device, npu.NpuDevice))

    class device(metaclass=_DeviceMeta):
        """torch.device that also accepts "npu", "npu:N", ("npu", N) (NPU device objects)."""

        def __new__(cls, type_or_str, index=None):
            if isinstance(type_or_str, (real_device, npu.NpuDevice)) and index is None:
                return type_or_str
            if isinstance(type_or_str, int) and not isinstance(type_or_str, bool):
                return npu.NpuDevice(type_or_str)
            if isinstance(type_or_str, str) and type_or_str.strip().startswith("npu"):
                if index is not None:
                    if ":" in type_or_str:
                        raise RuntimeError("type (string) must not include an index because "
                                           f"index was passed explicitly: {type_or_str}")
                    return npu.NpuDevice(index)
                return npu.parse_device(type_or_str)
            if index is None:
                return real_device(type_or_str)
            return real_device(type_or_str, index)

    device.__module__ = "torch"
    return device


def _rebuild_device(text):
    import torch
    return torch.device(text)


def _reduce_device(d):
    return (_rebuild_device, (str(d),))


def _factory(torch, orig):
    name = orig.__name__

    @functools.wraps(orig)
    def factory(*args, **kwargs):
        index = _npu_index(kwargs.get("device"))
        if index is None:
            return orig(*args, **kwargs)
        kwargs.pop("pin_memory", None)
        if name in _EMPTY or name in _FILLS or name in ("full", "full_like"):
            if name == "full" and kwargs.get("dtype") is None:  # meta full() infers no dtype
                value = kwargs["fill_value"] if "fill_value" in kwargs else args[1]
                kwargs["dtype"] = orig((), value).dtype
            meta = orig(*args, **dict(kwargs, device="meta"))
            t = NpuTensor.empty(tuple(meta.shape), meta.dtype, index)
            if name in _EMPTY:
                return t
            if name in _FILLS:
                return t.fill_(_FILLS[name])
            value = kwargs["fill_value"] if "fill_value" in kwargs else args[1]
            return t.fill_(value)
        kwargs["device"] = "cpu"
        return NpuTensor.from_cpu(orig(*args, **kwargs), index)
    return factory


def patch(torch):
    """Give a real torch module NPU devices backed by kvsim (idempotent)."""
    if getattr(torch, "_kvsim_npu", False):
        return
    npu_tensor.set_backend(RealBackend(torch))
    real_device = torch._C.device
    copyreg.pickle(real_device, _reduce_device)  # torch.device is no longer the C type
    torch.device = _make_device_class(real_device)
    torch.npu = npu
    sys.modules["torch.npu"] = npu

    tensor_cls = torch.Tensor
    orig_to = tensor_cls.to

    def npu_method(self, device=None, non_blocking=False, **kwargs):
        """A copy of this CPU tensor on an NPU (default: the current device)."""
        index = npu.current_device() if device is None else npu._device_index(device)
        return NpuTensor.from_cpu(self, npu._check(index))

    def to(self, *args, **kwargs):
        index, dtype, rest = None, kwargs.get("dtype"), []
        if "device" in kwargs:
            index = _npu_index(kwargs["device"])
        for a in args:
            if isinstance(a, NpuTensor):
                index, dtype = a.device.index, a.dtype
            elif isinstance(a, (str, int, npu.NpuDevice)) and not isinstance(a, bool) \
                    and npu.parse_device(a) is not None:
                index = _npu_index(a)
            else:
                rest.append(a)
        if index is None:
            return orig_to(self, *args, **kwargs)
        for a in rest:
            if isinstance(a, torch.dtype):
                dtype = a
        src = self if dtype is None or dtype == self.dtype else orig_to(self, dtype)
        return NpuTensor.from_cpu(src, index)

    to.__doc__ = orig_to.__doc__
    tensor_cls.npu = npu_method
    tensor_cls.to = to
    tensor_cls.is_npu = property(lambda self: False)
    for name in _FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, _factory(torch, getattr(torch, name)))
    torch._kvsim_npu = True
