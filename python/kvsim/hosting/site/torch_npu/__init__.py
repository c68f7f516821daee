"""torch_npu on kvsim: ``import torch_npu`` loads torch with simulated NPU support
(kvsim.hosting.torch_support) and ``torch_npu.npu`` is kvsim's NPU runtime, as torch.npu is."""
import torch

from kvsim.hosting import npu  # noqa: F401

__version__ = torch.__version__.split("+")[0] + "+kvsim"

if getattr(torch, "npu", None) is not npu:
    raise ImportError("torch was imported without kvsim's NPU support: call "
                      "kvsim.hosting.torch_support.install() before importing torch")
