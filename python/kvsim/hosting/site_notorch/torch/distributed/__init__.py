"""torch.distributed of the stand-in: kvsim.hosting.distributed (collectives among the simulated
processes) once that module exists; until then importable, with is_available() False and every
other name raising ImportError when used."""
import importlib.util as _util

if _util.find_spec("kvsim.hosting.distributed") is not None:
    from kvsim.hosting import distributed as _impl
    from kvsim.hosting.distributed import *  # noqa: F401,F403

    def __getattr__(name):
        return getattr(_impl, name)
else:
    def is_available():
        """False: kvsim.hosting.distributed is not there."""
        return False

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ImportError(f"torch.distributed.{name}: kvsim's torch stand-in has no "
                          "torch.distributed yet (kvsim.hosting.distributed is missing)")
