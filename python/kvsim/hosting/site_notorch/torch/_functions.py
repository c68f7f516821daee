"""torch functions of the stand-in: factories (device="npu" accepted), random numbers from a
per-process generator (seed 0 unless manual_seed), joins and comparisons."""
import builtins
import numbers

import numpy as np

from kvsim.hosting import context, npu
from kvsim.hosting.npu_tensor import NpuTensor
from kvsim.hosting.tensor_base import shape_args

from . import _dtypes as D
from ._tensor import (Tensor, allclose, equal, from_values, is_cpu, make, maximum, minimum,
                      npu_aware, npu_target, place)

__all__ = ["Generator", "allclose", "arange", "as_tensor", "cat", "concat", "empty",
           "empty_like", "equal", "eye", "from_numpy", "full", "full_like", "get_default_dtype",
           "initial_seed", "is_floating_point", "is_tensor", "linspace", "manual_seed",
           "maximum", "minimum", "no_grad", "inference_mode", "numel", "ones", "ones_like",
           "promote_types", "rand", "rand_like", "randint", "randn", "randn_like", "randperm",
           "seed", "stack", "tensor", "where", "zeros", "zeros_like", "isclose", "abs", "sum",
           "mean", "sqrt", "exp", "log", "max", "min", "argmax", "argmin", "add", "sub", "mul",
           "div", "matmul", "clamp", "flatten", "reshape", "squeeze", "unsqueeze", "transpose",
           "permute", "chunk", "split", "unbind", "narrow", "all", "any"]


def get_default_dtype():
    """torch.float32."""
    return D.float32


def promote_types(type1, type2):
    """The dtype both promote to."""
    return D.promote(type1, type2)


def is_tensor(obj):
    """True for CPU and NPU tensors."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """True for floating point tensors."""
    return input.dtype.kind == 2


def numel(input):
    """Number of elements."""
    return input.numel()


# Construction.

def _infer(data):
    """(numpy values, dtype) torch.tensor infers for data."""
    if isinstance(data, np.ndarray):
        return data, D.from_numpy_dtype(data.dtype)
    if isinstance(data, NpuTensor):
        data = data.cpu()
    if is_cpu(data):
        return data.values(), data.dtype
    if isinstance(data, (list, tuple)) and builtins.any(isinstance(x, Tensor) for x in data):
        data = [x.cpu().values() if isinstance(x, Tensor) else x for x in data]
    a = np.array(data)
    if a.dtype.kind == "b":
        return a, D.bool_
    if a.dtype.kind in "iu":
        return a, D.int64
    if a.dtype.kind == "f":
        return a, D.float32 if not isinstance(data, np.generic) else D.from_numpy_dtype(a.dtype)
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor copying `data` (nested lists, numbers, numpy arrays, tensors)."""
    values, inferred = _infer(data)
    d = dtype or inferred
    return place(from_values(np.array(values, copy=True), d), device)


def as_tensor(data, dtype=None, device=None):
    """tensor(data), sharing memory with a CPU tensor of the same dtype."""
    if is_cpu(data) and (dtype is None or dtype is data.dtype):
        return place(data, device)
    if isinstance(data, NpuTensor) and dtype in (None, data.dtype) and device is None:
        return data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    """A tensor sharing the array's memory."""
    return make(ndarray, D.from_numpy_dtype(ndarray.dtype))


def _sizes(size, kwargs):
    """The shape from positional sizes or the size= keyword."""
    if "size" in kwargs:
        if size:
            raise TypeError("size given both positionally and as a keyword")
        return (tuple(kwargs.pop("size")),)
    return size


def _filled(size, value, dtype, device):
    shape = tuple(builtins.int(d) for d in shape_args(size))
    index = npu_target(device)
    if index is not None:  # made on the NPU directly: no host copy of a large cache
        t = NpuTensor.empty(shape, dtype, npu._check(index))
        return t if value is None else t.fill_(value)
    if value is None:
        value = 0
    return place(from_values(np.full(shape, value), dtype), device)


def zeros(*size, out=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """Zeros of `size`."""
    return _filled(_sizes(size, kwargs), 0, dtype or D.float32, device)


def ones(*size, out=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """Ones of `size`."""
    return _filled(_sizes(size, kwargs), 1, dtype or D.float32, device)


def full(size, fill_value, *, out=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """`fill_value` everywhere (dtype inferred from it as torch does)."""
    if dtype is None:
        dtype = D.scalar_dtype(fill_value)
    return _filled((size,) if isinstance(size, numbers.Integral) else (tuple(size),),
                   fill_value, dtype, device)


def empty(*size, out=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """An uninitialised tensor (zeros on the host; fresh HBM on an NPU)."""
    return _filled(_sizes(size, kwargs), None, dtype or D.float32, device)


def _like(input, dtype, device):
    return tuple(input.shape), dtype or input.dtype, input.device if device is None else device


def zeros_like(input, *, dtype=None, device=None, **kwargs):
    """Zeros shaped like input (on its device unless told)."""
    shape, d, dev = _like(input, dtype, device)
    return _filled((shape,), 0, d, dev)


def ones_like(input, *, dtype=None, device=None, **kwargs):
    """Ones shaped like input."""
    shape, d, dev = _like(input, dtype, device)
    return _filled((shape,), 1, d, dev)


def full_like(input, fill_value, *, dtype=None, device=None, **kwargs):
    """fill_value everywhere, shaped like input."""
    shape, d, dev = _like(input, dtype, device)
    return _filled((shape,), fill_value, d, dev)


def empty_like(input, *, dtype=None, device=None, **kwargs):
    """Uninitialised, shaped like input."""
    shape, d, dev = _like(input, dtype, device)
    return _filled((shape,), None, d, dev)


def arange(start, end=None, step=1, *, out=None, dtype=None, device=None, **kwargs):
    """Values from start (default 0) to end, step apart."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        integral = builtins.all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = D.int64 if integral else D.float32
    return place(from_values(np.arange(start, end, step, dtype=np.float64
                                       if dtype.kind == 2 else np.int64), dtype), device)


def linspace(start, end, steps, *, out=None, dtype=None, device=None, **kwargs):
    """`steps` values evenly spaced from start to end."""
    return place(from_values(np.linspace(start, end, steps), dtype or D.float32), device)


def eye(n, m=None, *, out=None, dtype=None, device=None, **kwargs):
    """Identity matrix."""
    return place(from_values(np.eye(n, m), dtype or D.float32), device)


# Random numbers: one generator per simulated process, seeded 0 by default.

class Generator:
    """A random generator (numpy PCG64) with torch's seeding calls."""

    def __init__(self, device="cpu"):
        self.device = device
        self.manual_seed(0)

    def manual_seed(self, seed):
        """Restart from `seed`."""
        self._seed = builtins.int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self):
        """The seed last set."""
        return self._seed


def _generator(generator=None):
    return generator if generator is not None else \
        context.process_state("torch.standin.generator", Generator)


def manual_seed(seed):
    """Seed this process's generator; returns it."""
    return _generator().manual_seed(seed)


def initial_seed():
    """The seed of this process's generator."""
    return _generator().initial_seed()


def seed():
    """Reseed deterministically (kvsim has no entropy source): seed 0."""
    return _generator().manual_seed(0).initial_seed()


def _random(kind, size, dtype, device, generator):
    dtype = dtype or D.float32
    if dtype.kind != 2:
        raise RuntimeError(f"\"{kind}\" not implemented for '{dtype.name}'")
    rng = _generator(generator).rng
    shape = tuple(builtins.int(d) for d in shape_args(size))
    np_type = np.float64 if dtype is D.float64 else np.float32
    values = rng.random(shape, dtype=np_type) if kind == "uniform" else \
        rng.standard_normal(shape, dtype=np_type)
    return place(from_values(values, dtype), device)


def rand(*size, generator=None, out=None, dtype=None, device=None, **kwargs):
    """Uniform [0, 1) values."""
    return _random("uniform", _sizes(size, kwargs), dtype, device, generator)


def randn(*size, generator=None, out=None, dtype=None, device=None, **kwargs):
    """Standard normal values."""
    return _random("normal", _sizes(size, kwargs), dtype, device, generator)


def rand_like(input, *, dtype=None, device=None, **kwargs):
    """rand shaped like input."""
    shape, d, dev = _like(input, dtype, device)
    return _random("uniform", (shape,), d, dev, None)


def randn_like(input, *, dtype=None, device=None, **kwargs):
    """randn shaped like input."""
    shape, d, dev = _like(input, dtype, device)
    return _random("normal", (shape,), d, dev, None)


def randint(*args, size=None, generator=None, dtype=None, device=None, **kwargs):
    """Integers in [low, high): randint(high, size) or randint(low, high, size)."""
    args = list(args)
    if size is None:
        size = args.pop()
    low, high = (0, args[0]) if len(args) == 1 else args
    values = _generator(generator).rng.integers(low, high, tuple(size), dtype=np.int64)
    return place(from_values(values, dtype or D.int64), device)


def randperm(n, *, generator=None, dtype=None, device=None, **kwargs):
    """A random permutation of 0..n-1."""
    return place(from_values(_generator(generator).rng.permutation(n), dtype or D.int64), device)


# Joins and elementwise functions.

@npu_aware
def cat(tensors, dim=0, *, out=None):
    """Tensors joined along an existing dimension."""
    tensors = [t for t in tensors if not (t.dim() == 1 and t.numel() == 0)] or list(tensors)
    d = tensors[0].dtype
    for t in tensors[1:]:
        d = D.promote(d, t.dtype)
    ndim = tensors[0].dim()
    axis = dim % ndim if ndim else 0
    return from_values(np.concatenate([t.values() for t in tensors], axis=axis), d)


concat = cat


@npu_aware
def stack(tensors, dim=0, *, out=None):
    """Tensors joined along a new dimension."""
    d = tensors[0].dtype
    for t in tensors[1:]:
        d = D.promote(d, t.dtype)
    return from_values(np.stack([t.values() for t in tensors], axis=dim), d)


@npu_aware
def where(condition, input, other):
    """input where condition, else other."""
    def vals(x):
        return x.values() if is_cpu(x) else np.asarray(x)

    def dt(x):
        return (x.dtype, 2 if x.dim() else 1) if is_cpu(x) else (D.scalar_dtype(x), 0)
    rt = D.result_type([dt(input), dt(other)])
    return from_values(np.where(vals(condition), vals(input), vals(other)), rt)


@npu_aware
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise closeness."""
    return input.isclose(other, rtol, atol, equal_nan)


def _method(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"input.{name}(...)."
    return fn


for _name in ("abs", "sum", "mean", "sqrt", "exp", "log", "argmax", "argmin", "add", "sub",
              "mul", "div", "matmul", "clamp", "flatten", "reshape", "squeeze", "unsqueeze",
              "transpose", "permute", "chunk", "split", "unbind", "narrow", "all", "any"):
    globals()[_name] = _method(_name)


def max(input, dim=None, keepdim=False):
    """Largest element, (values, indices) along dim, or the elementwise maximum."""
    return input.max(dim, keepdim) if not isinstance(dim, Tensor) else maximum(input, dim)


def min(input, dim=None, keepdim=False):
    """Smallest element, (values, indices) along dim, or the elementwise minimum."""
    return input.min(dim, keepdim) if not isinstance(dim, Tensor) else minimum(input, dim)


class no_grad:
    """No-op context manager and decorator (the stand-in has no autograd)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


inference_mode = no_grad
