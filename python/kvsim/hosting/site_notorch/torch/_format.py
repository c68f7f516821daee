"""torch-style text of stand-in tensors: ``tensor([[1., 1.], ...])`` with torch's number formats,
summarisation past 1000 elements (3 edge items) and 80-column lines."""
import math

import numpy as np

THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80
PRECISION = 4


def _summarize(a, summarize):
    """Nested lists of values (None for an elided run) of a numpy array."""
    if a.ndim == 0:
        return a.item()
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        idx = list(range(EDGEITEMS)) + [None] + list(range(n - EDGEITEMS, n))
    else:
        idx = list(range(n))
    return [None if i is None else _summarize(a[i], summarize) for i in idx]


def _flat(values, out):
    if isinstance(values, list):
        for v in values:
            if v is not None:
                _flat(v, out)
    else:
        out.append(values)


class _Formatter:
    """One number format for every element, as torch chooses it from the values shown."""

    def __init__(self, values, kind):
        self.kind = kind
        self.fmt = "{}"
        self.int_mode = False
        if kind == 2:
            finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
            if not finite:
                self.int_mode, self.fmt = True, "{:.0f}"
            else:
                lo, hi = min(finite), max(finite)
                sci = hi / lo > 1000.0 or hi > 1.0e8
                if all(v == math.ceil(v) for v in finite):
                    if sci:
                        self.fmt = "{:.%de}" % PRECISION
                    else:
                        self.int_mode, self.fmt = True, "{:.0f}"
                elif sci or lo < 1.0e-4:
                    self.fmt = "{:.%de}" % PRECISION
                else:
                    self.fmt = "{:.%df}" % PRECISION
        # torch sizes columns by the nonzero finite values only (nan, inf, 0 may overhang)
        shown = values if kind != 2 else [v for v in values if math.isfinite(v) and v != 0]
        self.width = max([1] + [len(self._text(v)) for v in shown])

    def _text(self, v):
        if self.kind == 0:
            return str(bool(v))
        if self.kind == 1:
            return str(int(v))
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        s = self.fmt.format(v)
        return s + "." if self.int_mode else s

    def format(self, v):
        return self._text(v).rjust(self.width)


def _lines(values, fmt, indent, ndim):
    if not isinstance(values, list):
        return fmt.format(values)
    if ndim == 1:
        items = [" ..." if v is None else fmt.format(v) for v in values]
        per_line = max(1, int(math.floor((LINEWIDTH - indent) / (fmt.width + 2))))
        rows = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(rows) + "]"
    sep = "," + "\n" * (ndim - 1) + " " * (indent + 1)
    parts = ["..." if v is None else _lines(v, fmt, indent + 1, ndim - 1) for v in values]
    return "[" + sep.join(parts) + "]"


def tensor_str(values, kind, indent=7):
    """The data part of a tensor's text for a numpy array of Python-compatible values."""
    summarize = values.size > THRESHOLD
    nested = _summarize(values, summarize)
    flat = []
    _flat(nested, flat)
    fmt = _Formatter(flat, kind)
    return _lines(nested, fmt, indent, values.ndim)


def as_printable(values):
    """float16/float32 arrays print through float64, as torch formats doubles."""
    if values.dtype.kind == "f":
        return values.astype(np.float64)
    return values
