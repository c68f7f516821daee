"""Hosted processes: users' programs run unchanged as simulated host processes of one world.

``kvsim launch`` runs each program of a launch in this interpreter as a simulated host
process on a node of the world (DESIGN.md, "Simulated processes"). This package holds what such a
process sees of its host: its context (argv, environment, devices, clocks), the NPU runtime
behind ``torch.npu`` and ``torch_npu``, ``torch.distributed`` among the launched processes, and
the Ascend tools (``hccn_tool``, ``npu-smi``, ``/dev/davinci*``).
"""
