"""The stand-in's side of NPU tensors (kvsim.hosting.npu_tensor backend protocol)."""
import numpy as np

from . import _dtypes as D
from ._tensor import Size, Tensor, device, format_tensor, from_values, is_cpu, make


class StandinBackend:
    """CPU tensors of the numpy stand-in, as NPU tensors need them."""

    tensor_type = Tensor

    def is_tensor(self, x):
        return is_cpu(x)

    def is_dtype(self, x):
        return isinstance(x, D.dtype)

    def itemsize(self, dtype):
        return dtype.itemsize

    def is_integral(self, dtype):
        return dtype.kind in (0, 1)

    def shape_of(self, t):
        return t._a.shape

    def dtype_of(self, t):
        return t._dtype

    def size(self, shape):
        return Size(shape)

    def from_bytes(self, data, dtype, shape):
        if not data:
            return make(np.zeros(shape, dtype.storage), dtype)
        return make(np.frombuffer(bytearray(data), dtype=dtype.storage).reshape(shape), dtype)

    def to_bytes(self, t):
        return np.ascontiguousarray(t._a).tobytes()

    def full(self, shape, value, dtype):
        return from_values(np.full(shape, value), dtype)

    def as_tensor(self, value, dtype):
        from ._functions import tensor
        return tensor(value, dtype=dtype)

    def type_name(self, dtype):
        return dtype.type_name

    def device_type(self, dev):
        return device(dev).type

    def format(self, cpu, device_str):
        return format_tensor(cpu, device_str)
