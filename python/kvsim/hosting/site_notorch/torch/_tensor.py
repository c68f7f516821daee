"""torch.Tensor of the stand-in: a numpy array (bfloat16 as uint16 bits) and a torch dtype.

Indexing with ints/slices, view, reshape, permute, ... return views sharing the array, as in
torch; arithmetic follows torch's type promotion; NPU tensors (kvsim.hosting.npu_tensor) mixed
in go through the NPU dispatch, which applies torch's device rules.
"""
import builtins
import numbers
from collections import namedtuple

import numpy as np

from kvsim.hosting import npu
from kvsim.hosting.npu_tensor import NpuTensor, dispatch, join_repr
from kvsim.hosting.tensor_base import (TensorBase, basic_items, is_basic_key, numel_of,
                                       shape_args, to_args, wrap_dim)

from . import _dtypes as D
from . import _format

_MinMax = namedtuple("_MinMax", ["values", "indices"])


class Size(tuple):
    """torch.Size: a tuple of ints printed as ``torch.Size([2, 3])``."""

    def __new__(cls, dims=()):
        return super().__new__(cls, (int(d) for d in dims))

    def numel(self):
        """Product of the sizes."""
        return numel_of(self)

    def __getitem__(self, key):
        r = super().__getitem__(key)
        return Size(r) if isinstance(key, slice) else r

    def __repr__(self):
        return f"torch.Size({list(self)})"

    __str__ = __repr__


class _DeviceMeta(type):
    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or isinstance(obj, npu.NpuDevice)


class device(metaclass=_DeviceMeta):
    """torch.device: "npu"/"npu:N" give an NPU device, anything else a host-side device."""

    __slots__ = ("type", "index")

    def __new__(cls, type_or_str, index=None):
        if isinstance(type_or_str, device):
            return type_or_str
        if isinstance(type_or_str, builtins.int) and not isinstance(type_or_str, builtins.bool):
            return npu.NpuDevice(type_or_str)
        text = str(type_or_str)
        if index is not None:
            if ":" in text:
                raise RuntimeError("type (string) must not include an index because index was "
                                   f"passed explicitly: {text}")
            text = f"{text}:{index}"
        parsed = npu.parse_device(text)
        if parsed is not None:
            return parsed
        kind, _, idx = text.partition(":")
        if not kind.isidentifier() or (idx and not idx.isdigit()):
            raise RuntimeError(f"Invalid device string: '{text}'")
        d = object.__new__(cls)
        object.__setattr__(d, "type", kind)
        object.__setattr__(d, "index", builtins.int(idx) if idx else None)
        return d

    def __setattr__(self, name, value):
        raise AttributeError("torch.device is immutable")

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other):
        return type(other) is device and (other.type, other.index) == (self.type, self.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))


CPU = device("cpu")


def npu_target(dev):
    """The logical NPU index `dev` names, or None for host devices."""
    if dev is None or type(dev) is device:
        return None
    parsed = npu.parse_device(dev)
    if parsed is None:
        return None
    return npu.current_device() if parsed.index is None else parsed.index


def place(t, dev):
    """A CPU tensor where `dev` says: itself for None/cpu, a copy for an NPU."""
    if dev is None:
        return t
    index = npu_target(dev)
    if index is not None:
        return NpuTensor.from_cpu(t, npu._check(index))
    if str(device(dev)) != "cpu":
        raise RuntimeError(f"kvsim's torch stand-in has no device '{dev}' (use cpu or npu)")
    return t


def is_cpu(x):
    """True for stand-in CPU tensors (not NPU tensors)."""
    return type.__instancecheck__(Tensor, x)


def make(storage, dtype):
    """A tensor over a storage array (no copy)."""
    t = object.__new__(Tensor)
    t._a = storage if isinstance(storage, np.ndarray) else np.asarray(storage)
    t._dtype = dtype
    return t


def storage_of(values, dtype):
    """Storage array of `dtype` for computed values (bfloat16 rounded to nearest even)."""
    values = np.asarray(values)
    if dtype is D.bfloat16:
        return np.asarray(D.bf16_bits(values.astype(np.float32)))
    with np.errstate(all="ignore"):
        return np.asarray(values.astype(dtype.storage, copy=False))


def from_values(values, dtype):
    """A tensor of `dtype` holding computed values."""
    return make(storage_of(values, dtype), dtype)


def _has_npu(args):
    for a in args:
        if isinstance(a, NpuTensor):
            return True
        if isinstance(a, (list, tuple)) and _has_npu(a):
            return True
    return False


def npu_aware(func):
    """Route calls with NPU tensors among the arguments through the NPU dispatch."""
    def wrapper(*args, **kwargs):
        if _has_npu(args) or _has_npu(kwargs.values()):
            return dispatch(func, args, kwargs, func.__name__)
        return func(*args, **kwargs)
    wrapper.__name__ = func.__name__
    wrapper.__qualname__ = func.__qualname__
    wrapper.__doc__ = func.__doc__
    wrapper.__wrapped__ = func
    return wrapper


class _Operand:
    __slots__ = ("values", "dtype", "prio")

    def __init__(self, values, dtype, prio):
        self.values, self.dtype, self.prio = values, dtype, prio


def operand(x):
    """Values, dtype and promotion priority of a tensor or scalar; None for other objects."""
    if is_cpu(x):
        return _Operand(x.values(), x._dtype, 2 if x._a.ndim else 1)
    if isinstance(x, (builtins.bool, numbers.Number, np.bool_, np.number)) and \
            not isinstance(x, builtins.complex):
        return _Operand(np.asarray(x), D.scalar_dtype(x), 0)
    return None


def _binary(name, op, kind="arith"):
    reflected = name.startswith("__r")
    inplace = name.startswith("__i")

    def method(self, other):
        if isinstance(other, NpuTensor):
            return dispatch(getattr(Tensor, name), (self, other), name=name)
        o = operand(other)
        if o is None:
            if kind == "cmp" and name in ("__eq__", "__ne__"):
                return name == "__ne__"
            return NotImplemented
        rt = D.result_type([(self._dtype, 2 if self._a.ndim else 1), (o.dtype, o.prio)])
        out = rt
        if kind == "div" and rt.kind != 2:
            out = D.float32
        if kind == "bit" and rt.kind == 2:
            raise RuntimeError(f"\"{name.strip('_')}\" not implemented for '{rt.name}'")
        compute = out.compute if kind != "cmp" else rt.compute
        a = self.values().astype(compute, copy=False)
        b = o.values.astype(compute, copy=False)
        if reflected:
            a, b = b, a
        with np.errstate(all="ignore"):
            r = np.asarray(op(a, b))
        if kind == "cmp":
            return make(r.astype(np.bool_), D.bool_)
        if inplace:
            if out.kind > self._dtype.kind:
                raise RuntimeError(f"result type {_type_word(out)} can't be cast to the desired "
                                   f"output type {_type_word(self._dtype)}")
            self._a[...] = storage_of(np.broadcast_to(r, self._a.shape), self._dtype)
            return self
        return from_values(r, out)
    method.__name__ = name
    return method


def _type_word(d):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}[d.name]


def _index_key(key):
    if isinstance(key, tuple):
        return tuple(_index_key(k) for k in key)
    if isinstance(key, NpuTensor):
        key = key.cpu()
    if is_cpu(key):
        return key.values()
    if isinstance(key, list):
        return [_index_key(k) if is_cpu(k) else k for k in key]
    return key


class _TensorMeta(type):
    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or isinstance(obj, NpuTensor)


class Tensor(TensorBase, metaclass=_TensorMeta):
    """A CPU tensor of the stand-in (isinstance also accepts NPU tensors, as torch does)."""

    __slots__ = ("_a", "_dtype", "__weakref__")
    __array_priority__ = 100
    __hash__ = object.__hash__

    def __new__(cls, *args):
        if len(args) == 1 and not isinstance(args[0], numbers.Integral):
            return from_values(np.asarray(args[0], dtype=np.float32), D.float32)
        return make(np.zeros(shape_args(args), np.float32), D.float32)

    # Metadata (what NPU tensors share is in TensorBase).

    _shape = property(lambda self: self._a.shape)
    _strides = property(lambda self: tuple(s // self._dtype.itemsize for s in self._a.strides))

    def values(self):
        """The values as a numpy array in the dtype's compute type (shares memory unless bf16)."""
        if self._dtype is D.bfloat16:
            return D.bf16_values(self._a)
        return self._a

    @property
    def shape(self):
        return Size(self._a.shape)

    @property
    def device(self):
        return CPU

    is_npu = property(lambda self: False)
    is_cpu = property(lambda self: True)

    def element_size(self):
        """Bytes per element."""
        return self._dtype.itemsize

    def is_contiguous(self, memory_format=None):
        """True if the elements are dense in C order."""
        return builtins.bool(self._a.flags.c_contiguous)

    def is_floating_point(self):
        """True for floating point dtypes."""
        return self._dtype.kind == 2

    def data_ptr(self):
        """Address of the first element in this process's memory (0 if empty)."""
        return 0 if self._a.size == 0 else self._a.__array_interface__["data"][0]

    def requires_grad_(self, requires_grad=True):
        """Accepted and ignored: the stand-in has no autograd."""
        return self

    # Conversions.

    def numpy(self, *, force=False):
        """The values as a numpy array sharing memory."""
        if self._dtype is D.bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._a

    def __array__(self, dtype=None):
        a = self.values()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        """Nested Python lists of the values."""
        return self.values().tolist()

    def item(self):
        """The single value as a Python number."""
        if self._a.size != 1:
            raise RuntimeError(f"a Tensor with {self._a.size} elements cannot be converted to "
                               "Scalar")
        return self.values().reshape(()).item()

    def cpu(self, memory_format=None):
        """Itself (already on the CPU)."""
        return self

    def npu(self, device=None, non_blocking=False, **kwargs):
        """A copy on an NPU (default: the current device)."""
        index = npu.current_device() if device is None else npu._device_index(device)
        return NpuTensor.from_cpu(self, npu._check(index))

    def to(self, *args, **kwargs):
        """Convert dtype and/or move: to(dtype), to(device[, dtype]), to(other), kwargs."""
        dev, dtype, copy = to_args(args, kwargs, lambda a: isinstance(a, Tensor),
                                   lambda a: isinstance(a, D.dtype))
        t = self
        if dtype is not None and dtype is not self._dtype:
            t = from_values(self.values(), dtype)
        elif copy:
            t = self.clone()
        return place(t, dev)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """The type name ("torch.FloatTensor"), or a conversion."""
        if dtype is None:
            return "torch." + self._dtype.type_name
        if isinstance(dtype, str):
            for d in D.ALL:
                if dtype in ("torch." + d.type_name, d.type_name):
                    return self.to(d)
            raise ValueError(f"invalid type: '{dtype}'")
        return self.to(dtype)

    def float(self):
        """to(torch.float32)."""
        return self.to(D.float32)

    def double(self):
        """to(torch.float64)."""
        return self.to(D.float64)

    def half(self):
        """to(torch.float16)."""
        return self.to(D.float16)

    def bfloat16(self):
        """to(torch.bfloat16)."""
        return self.to(D.bfloat16)

    def int(self):
        """to(torch.int32)."""
        return self.to(D.int32)

    def long(self):
        """to(torch.int64)."""
        return self.to(D.int64)

    def short(self):
        """to(torch.int16)."""
        return self.to(D.int16)

    def char(self):
        """to(torch.int8)."""
        return self.to(D.int8)

    def byte(self):
        """to(torch.uint8)."""
        return self.to(D.uint8)

    def bool(self):
        """to(torch.bool)."""
        return self.to(D.bool_)

    def __index__(self):
        if self._a.size != 1 or self._dtype.kind == 2:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return builtins.int(self.item())

    def __contains__(self, element):
        return builtins.bool((self == element).any())

    def __repr__(self):
        return format_tensor(self, None)

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild, (np.array(self._a), self._dtype.name))

    # Data.

    def clone(self, memory_format=None):
        """A contiguous copy."""
        return make(np.array(self._a, copy=True, order="C"), self._dtype)

    def detach(self):
        """The same data."""
        return make(self._a, self._dtype)

    def fill_(self, value):
        """Set every element to `value`."""
        if isinstance(value, NpuTensor):
            value = value.cpu()
        if is_cpu(value):
            if value.dim() != 0:
                raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor "
                                   f"with {value.dim()} dimensions.")
            value = value.item()
        self._a[...] = storage_of(np.asarray(value), self._dtype)
        return self

    def copy_(self, src, non_blocking=False):
        """Copy (broadcast, converted) values of another tensor, NPU tensors included."""
        if isinstance(src, NpuTensor):
            src = src.cpu()
        if not is_cpu(src):
            raise TypeError(f"copy_(): argument 'other' must be Tensor, not {type(src).__name__}")
        self._a[...] = storage_of(np.broadcast_to(src.values(), self._a.shape), self._dtype)
        return self

    def new_tensor(self, data, dtype=None, device=None):
        """A tensor of `data` with this dtype by default."""
        from . import _functions
        return _functions.tensor(data, dtype=dtype or self._dtype, device=device)

    def new_zeros(self, *size, dtype=None, device=None):
        """Zeros with this dtype by default."""
        return place(make(np.zeros(shape_args(size), (dtype or self._dtype).storage),
                          dtype or self._dtype), device)

    def new_ones(self, *size, dtype=None, device=None):
        """Ones with this dtype by default."""
        return place(from_values(np.ones(shape_args(size)), dtype or self._dtype), device)

    def new_full(self, size, fill_value, dtype=None, device=None):
        """`fill_value` everywhere, with this dtype by default."""
        return place(from_values(np.full(tuple(size), fill_value), dtype or self._dtype), device)

    def new_empty(self, *size, dtype=None, device=None):
        """Uninitialised (zeros here) with this dtype by default."""
        return self.new_zeros(*size, dtype=dtype, device=device)

    # Views.

    def view(self, *shape):
        """A view with another shape (RuntimeError if that needs a copy) or dtype."""
        if len(shape) == 1 and isinstance(shape[0], D.dtype):
            d = shape[0]
            if d.itemsize != self._dtype.itemsize and not self._a.flags.c_contiguous:
                raise RuntimeError("self.stride(-1) must be 1 to view as a dtype of another size")
            return make(self._a.view(d.storage), d)
        new = shape_args(shape)
        v = self._a.reshape(new)
        if v.size and not np.shares_memory(v, self._a):
            raise RuntimeError("view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
        return make(v, self._dtype)

    def reshape(self, *shape):
        """A view if possible, else a copy, with another shape."""
        return make(self._a.reshape(shape_args(shape)), self._dtype)

    def flatten(self, start_dim=0, end_dim=-1):
        """Dimensions start_dim..end_dim merged into one."""
        if self._a.ndim == 0:
            return self.reshape(1)
        s, e = wrap_dim(start_dim, self._a.ndim), wrap_dim(end_dim, self._a.ndim)
        shape = self._a.shape
        return self.reshape(shape[:s] + (-1,) + shape[e + 1:]) if shape[s:e + 1] else self

    def unsqueeze(self, dim):
        """A view with a new dimension of size 1."""
        return make(np.expand_dims(self._a, wrap_dim(dim, self._a.ndim + 1)), self._dtype)

    def squeeze(self, dim=None):
        """A view without dimensions of size 1 (or only `dim`)."""
        if dim is None:
            return make(np.squeeze(self._a), self._dtype)
        if self._a.ndim == 0:
            return self.detach()
        d = wrap_dim(dim, self._a.ndim)
        return make(np.squeeze(self._a, d) if self._a.shape[d] == 1 else self._a, self._dtype)

    def permute(self, *dims):
        """A view with dimensions reordered."""
        return make(np.transpose(self._a, [wrap_dim(d, self._a.ndim) for d in shape_args(dims)]),
                    self._dtype)

    def transpose(self, dim0, dim1):
        """A view with two dimensions swapped."""
        if self._a.ndim == 0:
            return self.detach()
        n = self._a.ndim
        return make(np.swapaxes(self._a, wrap_dim(dim0, n), wrap_dim(dim1, n)), self._dtype)

    def t(self):
        """Transpose of a tensor of at most 2 dimensions."""
        if self._a.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self._a.ndim}D")
        return make(self._a.T, self._dtype)

    @property
    def T(self):
        return make(self._a.T, self._dtype)

    def expand(self, *sizes):
        """A broadcast view (read-only)."""
        sizes = list(shape_args(sizes))
        lead = len(sizes) - self._a.ndim
        for i in range(lead, len(sizes)):
            if sizes[i] == -1:
                sizes[i] = self._a.shape[i - lead]
        try:
            return make(np.broadcast_to(self._a, sizes), self._dtype)
        except ValueError as e:
            raise RuntimeError(f"The expanded size of the tensor must match the existing size "
                               f"at non-singleton dimension: {e}") from None

    def narrow(self, dim, start, length):
        """A view of `length` elements of `dim` from `start`."""
        d = wrap_dim(dim, self._a.ndim)
        key = [slice(None)] * self._a.ndim
        key[d] = slice(start, start + length)
        return make(self._a[tuple(key)], self._dtype)

    def select(self, dim, index):
        """A view of one index of `dim`."""
        d = wrap_dim(dim, self._a.ndim)
        key = [slice(None)] * self._a.ndim
        key[d] = index
        return make(self._a[tuple(key) + (Ellipsis,)], self._dtype)

    def split(self, split_size_or_sections, dim=0):
        """Views of consecutive pieces along `dim`."""
        d = wrap_dim(dim, self._a.ndim)
        size = self._a.shape[d]
        if isinstance(split_size_or_sections, numbers.Integral):
            step = builtins.int(split_size_or_sections)
            sizes = [builtins.min(step, size - s) for s in range(0, size, step)]
        else:
            sizes = list(split_size_or_sections)
            if sum(sizes) != size:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                                   f"{size}, but got split_sizes={sizes}")
        return self._pieces(d, sizes)

    def __getitem__(self, key):
        key = _index_key(key)
        if is_basic_key(key):
            return make(self._a[basic_items(key)], self._dtype)
        return make(np.array(self._a[key]), self._dtype)

    def __setitem__(self, key, value):
        if isinstance(value, NpuTensor):
            value = value.cpu()
        key = _index_key(key)
        vals = value.values() if is_cpu(value) else np.asarray(value)
        target_shape = np.shape(self._a[key])
        self._a[key] = storage_of(np.broadcast_to(vals, target_shape), self._dtype)

    # Math.

    def add(self, other, alpha=1):
        """self + alpha * other."""
        return self + (other * alpha if alpha != 1 else other)

    def sub(self, other, alpha=1):
        """self - alpha * other."""
        return self - (other * alpha if alpha != 1 else other)

    def mul(self, other):
        """self * other."""
        return self * other

    def div(self, other, rounding_mode=None):
        """self / other (rounding_mode "floor" or "trunc" as torch)."""
        if rounding_mode is None:
            return self / other
        q = self / other
        r = from_values(np.floor(q.values()) if rounding_mode == "floor"
                        else np.trunc(q.values()), q.dtype)
        o = operand(other)
        rt = D.result_type([(self._dtype, 2 if self._a.ndim else 1), (o.dtype, o.prio)])
        return r.to(rt)

    def add_(self, other, alpha=1):
        """In-place add."""
        return self.__iadd__(other * alpha if alpha != 1 else other)

    def sub_(self, other, alpha=1):
        """In-place subtract."""
        return self.__isub__(other * alpha if alpha != 1 else other)

    def mul_(self, other):
        """In-place multiply."""
        return self.__imul__(other)

    def div_(self, other):
        """In-place true division."""
        return self.__itruediv__(other)

    def eq(self, other):
        """Elementwise ==."""
        return self == other

    def ne(self, other):
        """Elementwise !=."""
        return self != other

    def lt(self, other):
        """Elementwise <."""
        return self < other

    def le(self, other):
        """Elementwise <=."""
        return self <= other

    def gt(self, other):
        """Elementwise >."""
        return self > other

    def ge(self, other):
        """Elementwise >=."""
        return self >= other

    def matmul(self, other):
        """Matrix product."""
        return self @ other

    def _reduce_dtype(self, dtype):
        if dtype is not None:
            return dtype
        return self._dtype if self._dtype.kind == 2 else D.int64

    def sum(self, dim=None, keepdim=False, dtype=None):
        """Sum of all elements or along dims (integers sum as int64)."""
        out = self._reduce_dtype(dtype)
        axis = None if dim is None else tuple(wrap_dim(d, self._a.ndim) for d in
                                              (dim if isinstance(dim, (tuple, list)) else (dim,)))
        return from_values(np.sum(self.values().astype(out.compute), axis=axis,
                                  keepdims=keepdim), out)

    def mean(self, dim=None, keepdim=False, dtype=None):
        """Mean of floating point tensors."""
        out = dtype or self._dtype
        if out.kind != 2:
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                               f"a floating point or complex dtype. Got: {_type_word(out)}")
        axis = None if dim is None else tuple(wrap_dim(d, self._a.ndim) for d in
                                              (dim if isinstance(dim, (tuple, list)) else (dim,)))
        return from_values(np.mean(self.values().astype(out.compute), axis=axis,
                                   keepdims=keepdim), out)

    def _extreme(self, fn, arg, dim, keepdim):
        if dim is None:
            if self._a.size == 0:
                raise RuntimeError("max(): Expected reduction dim to be specified for "
                                   "input.numel() == 0.")
            return from_values(fn(self.values()), self._dtype)
        d = wrap_dim(dim, self._a.ndim)
        return _MinMax(from_values(fn(self.values(), axis=d, keepdims=keepdim), self._dtype),
                       make(np.asarray(arg(self.values(), axis=d, keepdims=keepdim),
                                       dtype=np.int64), D.int64))

    def max(self, dim=None, keepdim=False):
        """Largest element, or (values, indices) along `dim`."""
        if isinstance(dim, (Tensor, NpuTensor)):
            return maximum(self, dim)
        return self._extreme(np.max, np.argmax, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """Smallest element, or (values, indices) along `dim`."""
        if isinstance(dim, (Tensor, NpuTensor)):
            return minimum(self, dim)
        return self._extreme(np.min, np.argmin, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        """Index of the largest element (flattened if dim is None)."""
        r = np.argmax(self.values(), axis=None if dim is None else wrap_dim(dim, self._a.ndim),
                      keepdims=keepdim)
        return make(np.asarray(r, dtype=np.int64), D.int64)

    def argmin(self, dim=None, keepdim=False):
        """Index of the smallest element (flattened if dim is None)."""
        r = np.argmin(self.values(), axis=None if dim is None else wrap_dim(dim, self._a.ndim),
                      keepdims=keepdim)
        return make(np.asarray(r, dtype=np.int64), D.int64)

    def all(self, dim=None, keepdim=False):
        """True if every element is nonzero."""
        return make(np.asarray(np.all(self.values(), axis=dim, keepdims=keepdim)), D.bool_)

    def any(self, dim=None, keepdim=False):
        """True if some element is nonzero."""
        return make(np.asarray(np.any(self.values(), axis=dim, keepdims=keepdim)), D.bool_)

    def _float_unary(self, fn):
        out = self._dtype if self._dtype.kind == 2 else D.float32
        with np.errstate(all="ignore"):
            return from_values(fn(self.values().astype(out.compute)), out)

    def sqrt(self):
        """Elementwise square root."""
        return self._float_unary(np.sqrt)

    def exp(self):
        """Elementwise exponential."""
        return self._float_unary(np.exp)

    def log(self):
        """Elementwise natural logarithm."""
        return self._float_unary(np.log)

    def abs(self):
        """Elementwise absolute value."""
        return abs(self)

    def neg(self):
        """Elementwise negation."""
        return -self

    def clamp(self, min=None, max=None):
        """Values limited to [min, max]."""
        v = self.values()
        if min is not None:
            v = np.maximum(v, min)
        if max is not None:
            v = np.minimum(v, max)
        return from_values(v, self._dtype)

    clip = clamp

    def clamp_(self, min=None, max=None):
        """In-place clamp."""
        return self.copy_(self.clamp(min, max))

    def equal(self, other):
        """True if same shape and equal values."""
        return equal(self, other)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """True if every element is close to other's."""
        return allclose(self, other, rtol, atol, equal_nan)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Elementwise closeness."""
        return make(np.isclose(self.values(), _values(other), rtol, atol, equal_nan), D.bool_)

    def __neg__(self):
        if self._dtype is D.bool_:
            raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        return from_values(-self.values(), self._dtype)

    def __pos__(self):
        return self

    def __abs__(self):
        return from_values(np.abs(self.values()), self._dtype)

    def __invert__(self):
        if self._dtype.kind == 2:
            raise RuntimeError("\"bitwise_not_cpu\" not implemented for "
                               f"'{_type_word(self._dtype)}'")
        return make(np.asarray(~self._a), self._dtype)


_OPS = {
    "add": (np.add, "arith"), "sub": (np.subtract, "arith"), "mul": (np.multiply, "arith"),
    "truediv": (np.true_divide, "div"), "floordiv": (np.floor_divide, "arith"),
    "mod": (np.remainder, "arith"), "pow": (np.power, "arith"), "matmul": (np.matmul, "arith"),
    "and": (np.bitwise_and, "bit"), "or": (np.bitwise_or, "bit"), "xor": (np.bitwise_xor, "bit"),
    "lshift": (np.left_shift, "bit"), "rshift": (np.right_shift, "bit"),
}
for _name, (_op, _kind) in _OPS.items():
    for _form in ("__%s__", "__r%s__", "__i%s__"):
        setattr(Tensor, _form % _name, _binary(_form % _name, _op, _kind))
for _name, _op in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                   ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    setattr(Tensor, f"__{_name}__", _binary(f"__{_name}__", _op, "cmp"))


def _values(x):
    if isinstance(x, NpuTensor):
        x = x.cpu()
    return x.values() if is_cpu(x) else np.asarray(x)


def _rebuild(array, dtype_name):
    return make(array, D.BY_NAME[dtype_name])


@npu_aware
def equal(input, other):
    """True if both tensors have the same shape and values."""
    return input.shape == other.shape and builtins.bool(np.array_equal(_values(input),
                                                                       _values(other)))


@npu_aware
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if every element of input is close to other's."""
    return builtins.bool(np.allclose(_values(input), _values(other), rtol, atol, equal_nan))


@npu_aware
def maximum(input, other):
    """Elementwise maximum."""
    rt = D.promote(input.dtype, other.dtype)
    return from_values(np.maximum(_values(input), _values(other)), rt)


@npu_aware
def minimum(input, other):
    """Elementwise minimum."""
    rt = D.promote(input.dtype, other.dtype)
    return from_values(np.minimum(_values(input), _values(other)), rt)


def format_tensor(t, device_str):
    """torch's text of a tensor, with ``device='...'`` when device_str is given."""
    suffixes = [f"device='{device_str}'"] if device_str else []
    d = t._dtype
    if t._a.size == 0:
        if t._a.ndim != 1:
            suffixes.append("size=" + str(tuple(t._a.shape)))
        if d is not D.float32:
            suffixes.append("dtype=" + repr(d))
        body = "[]"
    else:
        if d not in (D.float32, D.int64, D.bool_):
            suffixes.append("dtype=" + repr(d))
        body = _format.tensor_str(_format.as_printable(t.values()), d.kind)
    return join_repr(body, suffixes, 7, _format.LINEWIDTH)
