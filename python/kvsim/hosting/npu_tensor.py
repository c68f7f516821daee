"""NPU tensors whose bytes live in the simulated HBM of a world device.

An ``NpuTensor`` is a strided view (offset, shape, strides in elements) of a ``DeviceBuffer``
(kvsim.hosting.npu): ``data_ptr()`` is its simulated address, indexing with ints/slices and
view/reshape/permute/... give views as in torch, so writes through them reach the base tensor.
Everything else is computed on a CPU copy: in-place methods (name ending in ``_``, ``__i*__``)
write the result back, tensor results come back as new tensors on the same NPU. The CPU side is
the active torch (real, or the numpy stand-in), reached through a backend object that the
flavour installs with ``set_backend``.
"""
import numbers
import operator

import numpy as np
from numpy.lib.stride_tricks import as_strided

import kvsim
from kvsim.hosting import npu
from kvsim.hosting.tensor_base import (TensorBase, basic_items, is_basic_key, numel_of,
                                       shape_args, to_args, wrap_dim)

_backend = None

# Functions torch lets mix devices (or that kvsim lets compare across devices).
_CROSS_DEVICE_OK = {"equal", "allclose", "copy_", "__getitem__", "__setitem__", "is_same_size"}
_CHUNK_BYTES = 16 << 20
_CARRIERS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def set_backend(backend):
    """Install the CPU side of NPU tensors (done by the torch flavour in use)."""
    global _backend
    _backend = backend


def backend():
    """The CPU backend; RuntimeError if no torch flavour has been loaded."""
    if _backend is None:
        raise RuntimeError("NPU tensors need torch: import torch after "
                           "kvsim.hosting.torch_support.install()")
    return _backend


def _carrier(itemsize):
    return np.dtype(_CARRIERS.get(itemsize, f"V{itemsize}"))


def _contiguous_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def _infer_shape(shape, numel):
    shape = [operator.index(d) for d in shape]
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = numel_of([d for d in shape if d != -1])
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    if numel_of(shape) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _view_strides(shape, strides, new_shape):
    """Strides viewing (shape, strides) as new_shape without copying, or None if impossible.

    Dimensions of size 1 are dropped; the rest split into runs that are contiguous with one
    another; each run must be covered exactly by consecutive new dimensions.
    """
    if numel_of(new_shape) == 0:
        return _contiguous_strides(new_shape)
    runs = []  # [size, stride of its innermost element]
    for d, s in zip(shape, strides):
        if d == 1:
            continue
        if runs and runs[-1][1] == s * d:
            runs[-1] = [runs[-1][0] * d, s]
        else:
            runs.append([d, s])
    out = [0] * len(new_shape)
    dims = [i for i, d in enumerate(new_shape) if d != 1]
    k = 0
    for size, inner in runs:
        group, prod = [], 1
        while prod < size and k < len(dims):
            group.append(dims[k])
            prod *= new_shape[dims[k]]
            k += 1
        if prod != size:
            return None
        acc = inner
        for i in reversed(group):
            out[i] = acc
            acc *= new_shape[i]
    if k != len(dims):
        return None
    for i, d in enumerate(new_shape):  # size-1 dims: the stride torch would give
        if d == 1:
            out[i] = out[i + 1] * new_shape[i + 1] if i + 1 < len(new_shape) else 1
    return tuple(out)


def _devices_in(obj, npus, cpus):
    if isinstance(obj, NpuTensor):
        npus.append(obj.device)
    elif _backend is not None and _backend.is_tensor(obj):
        if obj.dim() > 0:
            cpus.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _devices_in(o, npus, cpus)
    elif isinstance(obj, dict):
        for o in obj.values():
            _devices_in(o, npus, cpus)


def _to_cpu(obj):
    if isinstance(obj, NpuTensor):
        return obj.cpu()
    if isinstance(obj, (list, tuple)) and any(isinstance(o, (NpuTensor, list, tuple)) for o in obj):
        items = [_to_cpu(o) for o in obj]
        return items if isinstance(obj, list) else _rebuild(obj, items)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _rebuild(seq, items):
    if type(seq) in (tuple, list):
        return type(seq)(items)
    if hasattr(seq, "_fields"):
        return type(seq)(*items)
    try:
        return type(seq)(items)
    except TypeError:
        return tuple(items)


def _to_npu(obj, device, keep):
    if _backend.is_tensor(obj):
        return obj if id(obj) in keep else NpuTensor.from_cpu(obj, device)
    if isinstance(obj, (list, tuple)):
        return _rebuild(obj, [_to_npu(o, device, keep) for o in obj])
    return obj


def _is_inplace(name):
    if name.startswith("__"):
        return name.startswith("__i") and name not in ("__invert__", "__index__", "__int__",
                                                         "__iter__") or name == "__setitem__"
    return name.endswith("_") and not name.startswith("_")


def dispatch(func, args, kwargs=None, name=None):
    """Run a torch function or Tensor method on CPU copies of its NPU tensors.

    torch's device rules hold: NPU tensors mixed with CPU tensors of one or more dimensions, or
    with tensors of another NPU, raise RuntimeError (except for a few comparisons and copies).
    In-place operations on an NPU tensor write the result back; other tensor results are
    placed on the first NPU argument's device, or on the device an explicit ``device=`` names.
    """
    kwargs = dict(kwargs or {})
    name = name or getattr(func, "__name__", "")
    npus, cpus = [], []
    _devices_in(args, npus, cpus)
    _devices_in(kwargs, npus, cpus)
    if name not in _CROSS_DEVICE_OK:
        distinct = list(dict.fromkeys(npus))
        if len(distinct) > 1 or (distinct and cpus):
            other = distinct[1] if len(distinct) > 1 else "cpu"
            raise RuntimeError("Expected all tensors to be on the same device, but found at "
                               f"least two devices, {distinct[0]} and {other}!")
    target = npus[0].index if npus else None
    if "device" in kwargs:
        dev = npu.parse_device(kwargs["device"]) if kwargs["device"] is not None else None
        if dev is not None:
            target = npu.current_device() if dev.index is None else dev.index
            kwargs["device"] = "cpu"
        elif kwargs["device"] is not None:
            target = None
    out = kwargs.get("out")
    cargs, ckwargs = _to_cpu(tuple(args)), _to_cpu(kwargs)
    result = func(*cargs, **ckwargs)
    if isinstance(out, NpuTensor):
        out._write_cpu(ckwargs["out"])
        return out
    if args and isinstance(args[0], NpuTensor) and _is_inplace(name):
        args[0]._write_cpu(cargs[0], name)
        return args[0] if result is cargs[0] else _to_npu(result, args[0].device.index, set())
    if target is None:
        return result
    keep = {id(a) for a in args if _backend.is_tensor(a)}  # CPU tensors the caller passed
    return _to_npu(result, target, keep)


def _rebuild_npu(cpu, device):
    return NpuTensor.from_cpu(cpu, device)


class NpuTensor(TensorBase):
    """A tensor on an NPU of the simulated world (torch_npu's ``device='npu:N'`` tensors)."""

    __slots__ = ("_buf", "_offset", "_shape", "_strides", "_dtype", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators
    __hash__ = object.__hash__

    # Construction.

    @classmethod
    def _new(cls, buf, offset, shape, strides, dtype):
        t = object.__new__(cls)
        t._buf, t._offset, t._shape, t._strides, t._dtype = buf, offset, tuple(shape), \
            tuple(strides), dtype
        return t

    @classmethod
    def empty(cls, shape, dtype, device=None):
        """An uninitialised tensor (fresh HBM) on a logical device (default: current)."""
        shape = tuple(operator.index(d) for d in shape)
        buf = npu.alloc(numel_of(shape) * backend().itemsize(dtype), device)
        return cls._new(buf, 0, shape, _contiguous_strides(shape), dtype)

    @classmethod
    def from_cpu(cls, cpu, device=None):
        """A copy of a CPU tensor on a logical device (default: current)."""
        b = backend()
        t = cls.empty(b.shape_of(cpu), b.dtype_of(cpu), device)
        if t._buf.nbytes:
            kvsim.write(t._buf.addr, b.to_bytes(cpu))
        return t

    # Metadata (what the stand-in's CPU tensors share is in TensorBase).

    @property
    def shape(self):
        return backend().size(self._shape)

    @property
    def device(self):
        return npu.NpuDevice(self._buf.device)

    @property
    def world_device(self):
        """The world device whose HBM holds the bytes (kvsim)."""
        return self._buf.world_device

    is_npu = property(lambda self: True)
    is_cpu = property(lambda self: False)
    is_quantized = property(lambda self: False)
    is_meta = property(lambda self: False)

    def element_size(self):
        """Bytes per element."""
        return backend().itemsize(self._dtype)

    def storage_offset(self):
        """Offset of the first element in its buffer, in elements."""
        return self._offset

    def data_ptr(self):
        """The simulated device address of the first element (0 for an empty tensor)."""
        if self._buf.nbytes == 0:
            return 0
        return self._buf.addr + self._offset * self.element_size()

    def is_contiguous(self, memory_format=None):
        """True if the elements are dense in C order."""
        acc = 1
        for d, s in zip(reversed(self._shape), reversed(self._strides)):
            if d != 1 and s != acc:
                return False
            acc *= d
        return True

    def _span(self):
        """(first byte address, byte count) covering every element."""
        item = self.element_size()
        extent = 1 + sum((d - 1) * s for d, s in zip(self._shape, self._strides))
        return self._buf.addr + self._offset * item, extent * item

    # Bytes.

    def _read_bytes(self):
        """The elements as C-ordered bytes."""
        if self.numel() == 0:
            return b""
        self._buf.check_alive()
        start, length = self._span()
        raw = kvsim.read(start, length)
        if self.is_contiguous():
            return raw
        item = self.element_size()
        flat = np.frombuffer(raw, dtype=_carrier(item))
        view = as_strided(flat, self._shape, [s * item for s in self._strides], writeable=False)
        return np.ascontiguousarray(view).tobytes()

    def _write_bytes(self, data):
        """Store C-ordered bytes of every element (a read-modify-write if not contiguous)."""
        if self.numel() == 0:
            return
        self._buf.check_alive()
        start, length = self._span()
        if self.is_contiguous():
            kvsim.write(start, data)
            return
        if any(s == 0 and d > 1 for d, s in zip(self._shape, self._strides)):
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               "tensor refers to a single memory location. Please clone() the "
                               "tensor before performing the operation.")
        item = self.element_size()
        raw = bytearray(kvsim.read(start, length))
        flat = np.frombuffer(raw, dtype=_carrier(item))
        view = as_strided(flat, self._shape, [s * item for s in self._strides])
        view[...] = np.frombuffer(data, dtype=_carrier(item)).reshape(self._shape)
        kvsim.write(start, raw)

    def _write_cpu(self, cpu, op="write"):
        b = backend()
        if tuple(b.shape_of(cpu)) != self._shape or b.dtype_of(cpu) != self._dtype:
            raise NotImplementedError(
                f"in-place {op} changes the shape or dtype of an NPU tensor "
                f"({self._shape} {self._dtype} -> {tuple(b.shape_of(cpu))} {b.dtype_of(cpu)}); "
                "kvsim does not support that")
        self._write_bytes(b.to_bytes(cpu))

    # Conversions.

    def cpu(self, memory_format=None):
        """A CPU tensor holding a copy of the bytes."""
        return backend().from_bytes(self._read_bytes(), self._dtype, self._shape)

    def npu(self, device=None, non_blocking=False, **kwargs):
        """This tensor on an NPU (default: the current device); self if already there."""
        index = npu.current_device() if device is None else npu._device_index(device)
        return self if index == self._buf.device else self._copy_to(index)

    def _copy_to(self, index):
        t = NpuTensor.empty(self._shape, self._dtype, index)
        t._write_bytes(self._read_bytes())
        return t

    def to(self, *args, **kwargs):
        """Move and/or convert: to(device), to(dtype), to(device, dtype), to(other), kwargs."""
        b = backend()
        device, dtype, copy = to_args(args, kwargs,
                                      lambda a: isinstance(a, NpuTensor) or b.is_tensor(a),
                                      b.is_dtype)
        target = self._buf.device
        if device is not None:
            dev = npu.parse_device(device)
            if dev is None:
                if b.device_type(device) != "cpu":
                    raise RuntimeError(f"kvsim does not simulate device '{device}'")
                cpu = self.cpu()
                return cpu.to(dtype) if dtype is not None and dtype != self._dtype else cpu
            target = npu.current_device() if dev.index is None else npu._check(dev.index)
        if dtype is not None and dtype != self._dtype:
            return NpuTensor.from_cpu(self.cpu().to(dtype), target)
        if target != self._buf.device:
            return self._copy_to(target)
        return self.clone() if copy else self

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """The type name ("torch.npu.FloatTensor") or a conversion to `dtype`."""
        b = backend()
        if dtype is None:
            return "torch.npu." + b.type_name(self._dtype)
        if isinstance(dtype, str):
            return self.cpu().type(dtype)
        return self.to(dtype)

    def numpy(self, *args, **kwargs):
        """Refused, as torch refuses device tensors."""
        raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                        "Tensor.cpu() to copy the tensor to host memory first.")

    __array__ = numpy

    def tolist(self):
        """Nested Python lists of the values."""
        return self.cpu().tolist()

    def item(self):
        """The single value as a Python number."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               "Scalar")
        return self.cpu().item()

    def __index__(self):
        if self.numel() != 1 or not backend().is_integral(self._dtype):
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __repr__(self, *args, **kwargs):
        return backend().format(self.cpu(), str(self.device))

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_rebuild_npu, (self.cpu(), self._buf.device))

    # Data, natively on the device.

    def clone(self, memory_format=None):
        """A contiguous copy on the same NPU."""
        return self._copy_to(self._buf.device)

    def detach(self):
        """The same data (NPU tensors carry no autograd)."""
        return NpuTensor._new(self._buf, self._offset, self._shape, self._strides, self._dtype)

    def fill_(self, value):
        """Set every element to `value` (a number or a 0-dim tensor)."""
        b = backend()
        if isinstance(value, NpuTensor) or b.is_tensor(value):
            if value.dim() != 0:
                raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor "
                                   f"with {value.dim()} dimensions.")
            value = value.item()
        pattern = b.to_bytes(b.full((), value, self._dtype))
        n = self.numel()
        if n == 0:
            return self
        if not self.is_contiguous():
            self._write_bytes(pattern * n)
            return self
        self._buf.check_alive()
        start = self.data_ptr()
        per_chunk = max(1, _CHUNK_BYTES // len(pattern))
        chunk = pattern * min(per_chunk, n)
        done = 0
        while done < n:
            k = min(per_chunk, n - done)
            kvsim.write(start + done * len(pattern), chunk if k == per_chunk or k == n
                        else chunk[:k * len(pattern)])
            done += k
        return self

    def copy_(self, src, non_blocking=False):
        """Copy src's values (NPU or CPU tensor, broadcast and converted as torch does)."""
        b = backend()
        if isinstance(src, NpuTensor):
            if src._shape == self._shape and src._dtype == self._dtype:
                self._write_bytes(src._read_bytes())
                return self
            src = src.cpu()
        if b.is_tensor(src) and tuple(b.shape_of(src)) == self._shape \
                and b.dtype_of(src) == self._dtype:
            self._write_bytes(b.to_bytes(src))
            return self
        tmp = self.cpu()
        tmp.copy_(src)
        self._write_bytes(b.to_bytes(tmp))
        return self

    # Views.

    def _view(self, offset, shape, strides):
        return NpuTensor._new(self._buf, offset, shape, strides, self._dtype)

    def view(self, *shape):
        """A view with another shape (or another dtype of the same element size)."""
        b = backend()
        if len(shape) == 1 and b.is_dtype(shape[0]):
            dtype = shape[0]
            if b.itemsize(dtype) != self.element_size():
                raise RuntimeError("kvsim NPU tensors view as another dtype only with the same "
                                   "element size")
            return NpuTensor._new(self._buf, self._offset, self._shape, self._strides, dtype)
        new = _infer_shape(shape_args(shape), self.numel())
        strides = _view_strides(self._shape, self._strides, new)
        if strides is None:
            raise RuntimeError("view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
        return self._view(self._offset, new, strides)

    def reshape(self, *shape):
        """A view if the strides allow, else a reshaped copy."""
        new = _infer_shape(shape_args(shape), self.numel())
        strides = _view_strides(self._shape, self._strides, new)
        if strides is None:
            return self.clone().view(new)
        return self._view(self._offset, new, strides)

    def flatten(self, start_dim=0, end_dim=-1):
        """Dimensions start_dim..end_dim merged into one."""
        if not self._shape:
            return self.reshape(1)
        s, e = wrap_dim(start_dim, self.dim()), wrap_dim(end_dim, self.dim())
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        merged = numel_of(self._shape[s:e + 1])
        return self.reshape(self._shape[:s] + (merged,) + self._shape[e + 1:])

    def permute(self, *dims):
        """A view with dimensions reordered."""
        dims = [wrap_dim(d, self.dim()) for d in shape_args(dims)]
        if sorted(dims) != list(range(self.dim())):
            raise RuntimeError("permute(): dims must be a permutation of the dimensions")
        return self._view(self._offset, [self._shape[d] for d in dims],
                          [self._strides[d] for d in dims])

    def transpose(self, dim0, dim1):
        """A view with two dimensions swapped."""
        if not self._shape:
            return self.detach()
        order = list(range(self.dim()))
        a, b = wrap_dim(dim0, self.dim()), wrap_dim(dim1, self.dim())
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    swapaxes = transpose

    def t(self):
        """Transpose of a tensor of at most 2 dimensions."""
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.dim()}D")
        return self.transpose(0, 1) if self.dim() == 2 else self.detach()

    @property
    def T(self):
        return self.permute(list(reversed(range(self.dim()))))

    def unsqueeze(self, dim):
        """A view with a dimension of size 1 inserted at `dim`."""
        d = wrap_dim(dim, self.dim() + 1)
        stride = self._strides[d] * self._shape[d] if d < self.dim() else 1
        return self._view(self._offset, self._shape[:d] + (1,) + self._shape[d:],
                          self._strides[:d] + (stride,) + self._strides[d:])

    def squeeze(self, dim=None):
        """A view without dimensions of size 1 (or only `dim` if it has size 1)."""
        if dim is None:
            keep = [i for i, d in enumerate(self._shape) if d != 1]
        else:
            drop = wrap_dim(dim, self.dim()) if self._shape else None
            keep = [i for i in range(self.dim()) if i != drop or self._shape[i] != 1]
        return self._view(self._offset, [self._shape[i] for i in keep],
                          [self._strides[i] for i in keep])

    def expand(self, *sizes):
        """A view broadcasting dimensions of size 1 to `sizes` (stride 0)."""
        sizes = shape_args(sizes)
        if len(sizes) < self.dim():
            raise RuntimeError("expand: the number of sizes provided must be greater or equal "
                               "to the number of dimensions in the tensor")
        lead = len(sizes) - self.dim()
        shape, strides = [], []
        for i, want in enumerate(sizes):
            if i < lead:
                if want < 0:
                    raise RuntimeError("expand: -1 is not allowed in a leading dimension")
                shape.append(want)
                strides.append(0)
                continue
            have, st = self._shape[i - lead], self._strides[i - lead]
            if want == -1 or want == have:
                shape.append(have)
                strides.append(st)
            elif have == 1:
                shape.append(want)
                strides.append(0)
            else:
                raise RuntimeError(f"The expanded size of the tensor ({want}) must match the "
                                   f"existing size ({have}) at non-singleton dimension {i}.")
        return self._view(self._offset, shape, strides)

    def narrow(self, dim, start, length):
        """A view of `length` elements of `dim` from `start`."""
        d = wrap_dim(dim, self.dim())
        if start < 0:
            start += self._shape[d]
        if start < 0 or length < 0 or start + length > self._shape[d]:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                               f"({self._shape[d]}).")
        shape = list(self._shape)
        shape[d] = length
        return self._view(self._offset + start * self._strides[d], shape, self._strides)

    def select(self, dim, index):
        """A view of one index of `dim` (that dimension removed)."""
        d = wrap_dim(dim, self.dim())
        size = self._shape[d]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
        index %= size
        return self._view(self._offset + index * self._strides[d],
                          self._shape[:d] + self._shape[d + 1:],
                          self._strides[:d] + self._strides[d + 1:])

    def split(self, split_size_or_sections, dim=0):
        """Views of consecutive pieces along `dim` (a size, or a list of sizes)."""
        d = wrap_dim(dim, self.dim())
        size = self._shape[d]
        if isinstance(split_size_or_sections, numbers.Integral):
            step = int(split_size_or_sections)
            sizes = [min(step, size - s) for s in range(0, size, step)] if step else [0]
        else:
            sizes = list(split_size_or_sections)
            if sum(sizes) != size:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                                   f"{size} (input tensor's size at dimension {d}), but got "
                                   f"split_sizes={sizes}")
        return self._pieces(d, sizes)

    def __getitem__(self, key):
        if isinstance(key, list):
            key = _to_cpu(key)
        if not is_basic_key(key):
            return dispatch(backend().tensor_type.__getitem__, (self, key), name="__getitem__")
        fake = as_strided(np.zeros(1, np.int64), self._shape, [s * 8 for s in self._strides])
        view = fake[basic_items(key)]
        base = fake.__array_interface__["data"][0]
        offset = (view.__array_interface__["data"][0] - base) // 8
        return self._view(self._offset + offset, view.shape, [s // 8 for s in view.strides])

    def __setitem__(self, key, value):
        if is_basic_key(key):
            target = self[key]
            b = backend()
            if isinstance(value, numbers.Number):
                target.fill_(value)
            elif isinstance(value, NpuTensor) or b.is_tensor(value):
                target.copy_(value)
            else:
                target.copy_(b.as_tensor(value, self._dtype))
            return
        dispatch(backend().tensor_type.__setitem__, (self, key, value), name="__setitem__")

    # Everything else: computed on a CPU copy.

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        attr = getattr(backend().tensor_type, name, None)
        if attr is None:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        if not callable(attr):  # a property of the CPU tensor (e.g. .real, .mT)
            return dispatch(lambda t: getattr(t, name), (self,), name=name)
        return lambda *args, **kwargs: dispatch(attr, (self,) + args, kwargs, name)


def _operator(name):
    def op(self, *args):
        attr = getattr(backend().tensor_type, name, None)
        if attr is None:
            return NotImplemented
        return dispatch(attr, (self,) + args, name=name)
    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift"):
    for _form in ("__%s__", "__r%s__", "__i%s__"):
        setattr(NpuTensor, _form % _name, _operator(_form % _name))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__", "__eq__", "__ne__", "__lt__",
              "__le__", "__gt__", "__ge__", "__contains__"):
    setattr(NpuTensor, _name, _operator(_name))


def join_repr(tensor_str, suffixes, indent=7, linewidth=80):
    """torch's ``tensor(...)`` text: data, then suffixes, wrapped past `linewidth` columns."""
    parts = ["tensor(" + tensor_str]
    last = len(parts[0]) - parts[0].rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > linewidth:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"
