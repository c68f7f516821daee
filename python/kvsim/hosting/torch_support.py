"""The torch a launched program (and a script with kvsim) gets: Debian's torch, patched with NPU
support (kvsim.hosting.torch_real) by an import hook when the program first imports it, so that
programs that never import torch do not pay for it. Call ``install()`` once per interpreter,
before the program's code imports torch. ``site/`` (torch_npu, torchair) goes on sys.path. A
child process that should see the same needs ``site_dirs()`` on its PYTHONPATH and ``bin_dir()``
on its PATH.
"""
import importlib.abc
import importlib.machinery
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(_HERE, "site")
BIN = os.path.join(_HERE, "bin")

_installed = False


def _check_mode():
    """KVSIM_TORCH may only say "real" (or "auto"): the numpy stand-in for torch is gone."""
    mode = os.environ.get("KVSIM_TORCH", "").strip().lower() or "auto"
    if mode not in ("auto", "real"):
        raise ValueError(f"KVSIM_TORCH={mode!r}: expected 'auto' or 'real' (kvsim uses Debian's "
                         "python3-torch; tools/install-deps.sh installs it)")


def site_dirs():
    """Directories to put first on the path of a Python that should see kvsim's shims."""
    return [SITE]


def bin_dir():
    """Directory of hccn_tool and npu-smi, for PATH."""
    return BIN


class _PatchingLoader(importlib.abc.Loader):
    """Loads torch with its own loader, then patches it."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _remove_hook()
        from kvsim.hosting import torch_real
        torch_real.patch(module)

    def __getattr__(self, name):  # resource readers, get_source, ... of the real loader
        return getattr(self._loader, name)


class _TorchHook(importlib.abc.MetaPathFinder):
    """Finds torch as the other finders do, with a loader that patches it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def _remove_hook():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchHook)]


def install():
    """Set up torch, torch_npu and torchair for this interpreter (idempotent)."""
    global _installed
    if _installed:
        return
    _check_mode()
    if importlib.machinery.PathFinder.find_spec("torch", sys.path) is None:
        raise RuntimeError("torch is not installed: kvsim needs Debian's python3-torch "
                           "(tools/install-deps.sh installs it)")
    if SITE in sys.path:
        sys.path.remove(SITE)
    sys.path.insert(0, SITE)
    loaded = sys.modules.get("torch")
    if loaded is not None:
        from kvsim.hosting import torch_real
        torch_real.patch(loaded)
    else:
        sys.meta_path.insert(0, _TorchHook())
    _installed = True
