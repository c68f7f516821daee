"""dtypes of the numpy-backed torch stand-in, their promotion rules and bfloat16 bits."""
import numpy as np


class dtype:
    """A torch dtype: its name, element size and the numpy type its values compute in."""

    __slots__ = ("name", "itemsize", "storage", "compute", "kind", "type_name")

    def __init__(self, name, storage, compute, kind, type_name):
        self.name = name
        self.storage = np.dtype(storage)   # numpy dtype of the stored bits
        self.compute = np.dtype(compute)   # numpy dtype values are computed in
        self.itemsize = self.storage.itemsize
        self.kind = kind                   # 0 bool, 1 integer, 2 floating point
        self.type_name = type_name         # legacy tensor type name ("FloatTensor")

    @property
    def is_floating_point(self):
        return self.kind == 2

    @property
    def is_complex(self):
        return False

    @property
    def is_signed(self):
        return self.name not in ("bool", "uint8")

    def to_float32(self):
        return float32 if self.kind == 2 else self

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


def _by_name(name):
    return BY_NAME[name]


bool_ = dtype("bool", np.bool_, np.bool_, 0, "BoolTensor")
uint8 = dtype("uint8", np.uint8, np.uint8, 1, "ByteTensor")
int8 = dtype("int8", np.int8, np.int8, 1, "CharTensor")
int16 = dtype("int16", np.int16, np.int16, 1, "ShortTensor")
int32 = dtype("int32", np.int32, np.int32, 1, "IntTensor")
int64 = dtype("int64", np.int64, np.int64, 1, "LongTensor")
float16 = dtype("float16", np.float16, np.float16, 2, "HalfTensor")
bfloat16 = dtype("bfloat16", np.uint16, np.float32, 2, "BFloat16Tensor")
float32 = dtype("float32", np.float32, np.float32, 2, "FloatTensor")
float64 = dtype("float64", np.float64, np.float64, 2, "DoubleTensor")

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.storage: d for d in ALL if d is not bfloat16}

_INT_ORDER = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4}


def from_numpy_dtype(np_dtype):
    """The dtype of a numpy array's values (TypeError for types torch lacks)."""
    d = _BY_NUMPY.get(np.dtype(np_dtype))
    if d is None:
        raise TypeError(f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype)}. The only "
                        "supported types are: float64, float32, float16, int64, int32, int16, "
                        "int8, uint8, and bool.")
    return d


def promote(a, b):
    """torch.promote_types for the stand-in's dtypes."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if a.kind > b.kind else b
    if a.kind == 2:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    if a.kind == 1:
        if "uint8" in (a.name, b.name):
            other = b if a is uint8 else a
            return int16 if other is int8 else other
        return a if _INT_ORDER[a.name] >= _INT_ORDER[b.name] else b
    return a


def _combine(higher, lower):
    # higher: dtype from operands of higher priority (tensors over 0-dim tensors over scalars)
    if higher is None:
        return lower
    if lower is None or higher.kind == 2:
        return higher
    if higher is bool_ or lower.kind == 2:
        return promote(higher, lower)
    return higher


def result_type(operands):
    """Dtype of an elementwise op: [(dtype, priority)] with 2 tensor, 1 0-dim, 0 scalar."""
    best = [None, None, None]
    for d, prio in operands:
        best[prio] = d if best[prio] is None else promote(best[prio], d)
    return _combine(best[2], _combine(best[1], best[0]))


def scalar_dtype(value):
    """Dtype torch gives a Python scalar in type promotion (default float is float32)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return float32


def bf16_bits(values):
    """float32 values -> bfloat16 bits (uint16), rounding to nearest even; NaN becomes 0xFFFF
    as in torch's CPU conversion."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = 0xFFFF
    return out


def bf16_values(bits):
    """bfloat16 bits (uint16) -> float32 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
