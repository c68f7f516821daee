"""Which torch hosted programs get, and how: call ``install()`` once per interpreter, before
any hosted code imports torch.

- Real torch (installed, and ``KVSIM_TORCH`` is unset, "auto" or "real"): an import hook patches
  torch with NPU support (kvsim.hosting.torch_real) when the program first imports it, so
  programs that never import torch do not pay for it.
- Stand-in (no torch installed, or ``KVSIM_TORCH=standin``): ``site_notorch/`` goes first on
  sys.path, so ``import torch`` gives the numpy-backed stand-in.
In both cases ``site/`` (torch_npu, torchair) is on sys.path. Child processes that should see
the same need ``site_dirs()`` on their PYTHONPATH and ``bin_dir()`` on their PATH.
"""
import importlib.abc
import importlib.machinery
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(_HERE, "site")
SITE_NOTORCH = os.path.join(_HERE, "site_notorch")
BIN = os.path.join(_HERE, "bin")

_real = None  # the flavour chosen by install()


def _mode():
    mode = os.environ.get("KVSIM_TORCH", "").strip().lower() or "auto"
    if mode not in ("auto", "real", "standin"):
        raise ValueError(f"KVSIM_TORCH={mode!r}: expected 'auto', 'real' or 'standin'")
    return mode


def _without_standin(path):
    return [p for p in path if os.path.abspath(p or os.curdir) != SITE_NOTORCH]


def _real_torch_spec():
    """Where a real torch would be imported from (the stand-in's directory left out)."""
    return importlib.machinery.PathFinder.find_spec("torch", _without_standin(sys.path))


def use_real_torch():
    """True if hosted programs get the real torch, False for the numpy stand-in."""
    if _real is not None:
        return _real
    mode = _mode()
    if mode == "standin":
        return False
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return not getattr(loaded, "_KVSIM_STANDIN", False)
    found = _real_torch_spec() is not None
    if mode == "real" and not found:
        raise RuntimeError("KVSIM_TORCH=real, but torch is not installed")
    return found


def site_dirs():
    """Directories to put first on the path of a Python that should see kvsim's shims."""
    return [SITE] if use_real_torch() else [SITE_NOTORCH, SITE]


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
    """Finds the real torch as the other finders do (never the stand-in), with a loader that
    patches it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec(fullname, _without_standin(sys.path), target)
            else:
                spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def _remove_hook():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchHook)]


def _prepend(path):
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)


def install():
    """Set up torch, torch_npu and torchair for this interpreter (idempotent); returns
    use_real_torch()."""
    global _real
    if _real is not None:
        return _real
    real = use_real_torch()
    loaded = sys.modules.get("torch")
    if not real and loaded is not None and not getattr(loaded, "_KVSIM_STANDIN", False):
        raise RuntimeError("KVSIM_TORCH=standin, but the real torch is already imported")
    _prepend(SITE)
    if real:
        while SITE_NOTORCH in sys.path:  # a parent's stand-in path must not shadow torch
            sys.path.remove(SITE_NOTORCH)
        if loaded is not None:
            from kvsim.hosting import torch_real
            torch_real.patch(loaded)
        else:
            sys.meta_path.insert(0, _TorchHook())
    else:
        _prepend(SITE_NOTORCH)
        importlib.invalidate_caches()
    _real = real
    return real
