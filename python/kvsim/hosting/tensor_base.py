"""torch's tensor metadata, conversions and argument rules for NPU tensors
(kvsim.hosting.npu_tensor), whose bytes live in simulated HBM rather than in torch's storage.

``TensorBase`` works through what each class provides: ``_shape`` (tuple of ints), ``_strides``
(in elements), ``_dtype``, ``shape``, ``element_size()``, ``item()``, ``is_contiguous()``,
``clone()``, ``detach()``, ``fill_()``, ``view()``, ``reshape()``, ``expand()``, ``narrow()``,
``select()``, ``split()`` and indexing.
"""
import numbers

import numpy as np


def numel_of(shape):
    """Number of elements of a shape."""
    n = 1
    for d in shape:
        n *= d
    return n


def wrap_dim(dim, ndim):
    """`dim` as an index in [0, ndim) (0-dim tensors take 0 and -1), or torch's IndexError."""
    lim = max(ndim, 1)
    if not -lim <= dim < lim:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-lim}, {lim - 1}], but got {dim})")
    return dim % lim


def shape_args(args):
    """Sizes given as f(2, 3) or f((2, 3)), as a tuple."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tuple(args[0])
    return tuple(args)


def is_basic_key(key):
    """True if an index key holds only ints, slices, None and Ellipsis (a view in torch)."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            return False
    return True


def basic_items(key):
    """A basic key as a tuple ending in Ellipsis, so numpy gives a view and reads no element."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
    if Ellipsis not in items:
        items = items + (Ellipsis,)
    return items


def to_args(args, kwargs, is_tensor, is_dtype):
    """(device, dtype, copy) of a ``Tensor.to`` call: to(device), to(dtype), to(other), kwargs.

    Consumes `kwargs`; a positional bool is non_blocking.
    """
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if is_tensor(a):
            device, dtype = a.device, a.dtype
        elif is_dtype(a):
            dtype = a
        elif isinstance(a, bool):
            continue
        elif a is not None:
            device = a
    return device, dtype, copy


class TensorBase:
    """torch.Tensor's metadata and conversions common to NPU and stand-in CPU tensors."""

    __slots__ = ()

    is_cuda = property(lambda self: False)
    is_sparse = property(lambda self: False)
    requires_grad = property(lambda self: False)
    grad = property(lambda self: None)
    grad_fn = property(lambda self: None)
    is_leaf = property(lambda self: True)

    @property
    def dtype(self):
        return self._dtype

    @property
    def data(self):
        return self.detach()

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        """Number of dimensions."""
        return len(self._shape)

    ndimension = dim

    def numel(self):
        """Number of elements."""
        return numel_of(self._shape)

    nelement = numel

    @property
    def itemsize(self):
        return self.element_size()

    @property
    def nbytes(self):
        return self.numel() * self.element_size()

    def size(self, dim=None):
        """Shape, or one dimension's size."""
        if dim is None:
            return self.shape
        return self._shape[wrap_dim(dim, len(self._shape))]

    def stride(self, dim=None):
        """Strides in elements, or one dimension's stride."""
        if dim is None:
            return self._strides
        return self._strides[wrap_dim(dim, len(self._shape))]

    def contiguous(self, memory_format=None):
        """Self if contiguous, else a contiguous copy."""
        return self if self.is_contiguous() else self.clone()

    def zero_(self):
        """Set every element to zero."""
        return self.fill_(0)

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __format__(self, spec):
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo):
        return self.clone()

    def view_as(self, other):
        """view(other.shape)."""
        return self.view(tuple(other.shape))

    def reshape_as(self, other):
        """reshape(other.shape)."""
        return self.reshape(tuple(other.shape))

    def expand_as(self, other):
        """expand(other.shape)."""
        return self.expand(tuple(other.shape))

    def _pieces(self, d, sizes):
        """Views of consecutive pieces of `sizes` elements along dimension d (split's result)."""
        out, start = [], 0
        for n in sizes:
            out.append(self.narrow(d, start, n))
            start += n
        return tuple(out)

    def chunk(self, chunks, dim=0):
        """At most `chunks` views of equal size along `dim` (the last may be smaller)."""
        size = self._shape[wrap_dim(dim, len(self._shape))]
        return self.split(max(1, -(-size // chunks)), dim)

    def unbind(self, dim=0):
        """Views of every index of `dim`."""
        d = wrap_dim(dim, len(self._shape))
        return tuple(self.select(d, i) for i in range(self._shape[d]))
