"""What a program sees of its simulated host: its context (node, devices), the NPU runtime behind
``torch.npu`` and ``torch_npu`` with NPU tensors whose bytes live in simulated HBM, and the Ascend
tools (``hccn_tool``, ``npu-smi``, ``/dev/davinci*``). A launched Python program (an OS process,
kvsim.launched) gets them at start; a script that makes its own kvsim.World gets them from
``kvsim.hosting.torch_support.install()``.
"""
