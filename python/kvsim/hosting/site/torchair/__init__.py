"""torchair is not simulated by kvsim: the module imports, and every name taken from it is a
stand-in that raises NotImplementedError when called or looked into."""


class _Unsimulated:
    """A torchair name: using it raises NotImplementedError."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"torchair.{self._name} is not simulated by kvsim")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NotImplementedError(f"torchair.{self._name}.{attr} is not simulated by kvsim")

    def __repr__(self):
        return f"<torchair.{self._name}: not simulated by kvsim>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Unsimulated(name)
