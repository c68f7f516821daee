"""A numpy-backed stand-in for torch, for hosted programs where torch is not installed.

It covers what KV-cache transfer scripts use: dtypes (bfloat16 stored as uint16 bits, converted
from float32 by round-to-nearest-even), Tensor, factories, random numbers from a per-process
generator (seed 0 unless manual_seed), joins, comparisons, and NPU tensors: ``torch.npu`` is
kvsim's NPU runtime, ``device="npu:N"`` / ``.npu()`` place tensors in simulated HBM.
No autograd, no nn, no linear algebra beyond matmul.
"""
import sys as _sys
import types as _types

from kvsim.hosting import npu
from kvsim.hosting import npu_tensor as _npu_tensor

from . import _dtypes
from ._backend import StandinBackend as _StandinBackend
from ._functions import (  # noqa: F401
    Generator, abs, add, all, allclose, any, arange, argmax, argmin, as_tensor, cat, chunk,
    clamp, concat, div, empty, empty_like, equal, exp, eye, flatten, from_numpy, full, full_like,
    get_default_dtype, inference_mode, initial_seed, is_floating_point, is_tensor, isclose,
    linspace, log, manual_seed, matmul, max, maximum, mean, min, minimum, mul, narrow, no_grad,
    numel, ones, ones_like, permute, promote_types, rand, rand_like, randint, randn, randn_like,
    randperm, reshape, seed, split, sqrt, squeeze, stack, sub, sum, tensor, transpose, unbind,
    unsqueeze, where, zeros, zeros_like)
from ._tensor import Size, Tensor, device  # noqa: F401

_KVSIM_STANDIN = True
__version__ = "2.1.0+kvsim.standin"

dtype = _dtypes.dtype
uint8, int8, int16, int32, int64 = (_dtypes.uint8, _dtypes.int8, _dtypes.int16, _dtypes.int32,
                                    _dtypes.int64)
float16, bfloat16, float32, float64 = (_dtypes.float16, _dtypes.bfloat16, _dtypes.float32,
                                       _dtypes.float64)
half, double, short, long = float16, float64, int16, int64
globals().update({"bool": _dtypes.bool_, "float": float32, "int": int32})

_sys.modules[__name__ + ".npu"] = npu

cuda = _types.ModuleType(__name__ + ".cuda", "No CUDA devices in kvsim's torch stand-in.")
cuda.is_available = lambda: False
cuda.device_count = lambda: 0
_sys.modules[cuda.__name__] = cuda

_npu_tensor.set_backend(_StandinBackend())

from . import distributed  # noqa: E402,F401
