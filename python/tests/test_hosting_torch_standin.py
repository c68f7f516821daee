"""The numpy torch stand-in (KVSIM_TORCH=standin), run in a child interpreter so this process's
real torch is left alone: its checks, and its text and bfloat16 rounding against real torch."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

CHILD = os.path.join(os.path.dirname(__file__), "hosting_standin_child.py")
CHECKS = ["check_cpu_tensor_memory", "check_device_rules", "check_distributed_placeholder",
          "check_dtypes", "check_flavour", "check_llm_datadist_transfer", "check_memory_freed",
          "check_npu_in_place_and_views", "check_npu_round_trip",
          "check_rng_is_seeded_per_process", "check_set_device_of_a_process"]

# Expressions evaluated with both torches; their repr() must be identical.
EXPRESSIONS = [
    "torch.ones(2, 3)",
    "torch.full((3, 10), 0, dtype=torch.float)",
    "torch.tensor([0.1234567, 2.5])",
    "torch.tensor([1e-5, 1.0])",
    "torch.tensor([1e10, 1.0])",
    "torch.tensor([float('nan'), 1.0, float('inf')])",
    "torch.tensor([1.0, -0.0])",
    "torch.tensor([-3.0, 2.0])",
    "torch.tensor(3.5)",
    "torch.tensor(7)",
    "torch.tensor(True)",
    "torch.zeros(0, 3)",
    "torch.zeros(0, 3, dtype=torch.int32)",
    "torch.tensor([], dtype=torch.float16)",
    "torch.arange(2000)",
    "torch.arange(2000.).reshape(40, 50)",
    "torch.ones(3, 30)",
    "torch.ones(2, 2, 2)",
    "torch.ones(2, 16 * 1024, dtype=torch.float16)",
    "torch.tensor([[True, False], [False, True]])",
    "torch.tensor([-1.5, 2.25], dtype=torch.bfloat16)",
    "torch.tensor([1, -100], dtype=torch.int8)",
    "torch.tensor([1, 2], dtype=torch.int32) / 2",
    "torch.tensor([1, 2], dtype=torch.uint8) + torch.tensor([1], dtype=torch.int8)",
    "torch.tensor([3, -7]) // 2",
    "torch.tensor([3, -7]) % 2",
    "torch.tensor([1.5], dtype=torch.float16) * 2",
    "torch.ones(2, dtype=torch.bfloat16) + 0.1",
    "torch.tensor([True, False]) + 1",
    "torch.tensor([1, 2], dtype=torch.int32) + 2.5",
    "torch.tensor([1, 2], dtype=torch.int16) * torch.tensor(3)",
    "torch.arange(6).reshape(2, 3).t()",
    "torch.arange(12).reshape(3, 4)[1:, ::2]",
    "torch.arange(6.).reshape(2, 3).sum(1)",
    "torch.arange(6, dtype=torch.int32).sum()",
    "torch.arange(6.).reshape(2, 3).mean()",
    "torch.arange(6.).reshape(2, 3).max(1).values",
    "torch.cat([torch.ones(2), torch.zeros(3)])",
    "torch.stack([torch.ones(2), torch.zeros(2)], 1)",
    "torch.arange(6.).reshape(2, 3) @ torch.ones(3, 2)",
    "torch.arange(4) == torch.tensor([0, 5, 2, 7])",
    "torch.arange(10)[torch.tensor([1, 3])]",
    "torch.full((2, 2), 7).to(torch.float16)",
    "torch.linspace(0, 1, 5)",
    "torch.eye(2, dtype=torch.int64)",
    "torch.where(torch.tensor([True, False]), torch.tensor([1., 2.]), 0.5)",
]


@pytest.fixture(scope="module")
def child():
    rng = np.random.default_rng(11)
    special = [1.0, 1.00390625, 1.01171875, -2.5, 3.4e38, 1e-40, -0.0, float("nan"),
               float("-nan"), float("inf")]
    values = special + (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).tolist()
    env = dict(os.environ, KVSIM_TORCH="standin", SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    request = json.dumps({"reprs": EXPRESSIONS, "bf16": values})
    proc = subprocess.run([sys.executable, CHILD], input=request, capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), values


@pytest.mark.parametrize("name", CHECKS)
def test_standin_check(child, name):
    result, _ = child
    assert sorted(result["checks"]) == CHECKS  # every check ran
    assert result["checks"][name] == "ok", result["checks"][name]


def _real_torch():
    from kvsim.hosting import torch_support
    torch_support.install()
    torch = pytest.importorskip("torch")
    if getattr(torch, "_KVSIM_STANDIN", False):
        pytest.skip("real torch not installed: nothing to compare with")
    return torch


@pytest.mark.parametrize("index", range(len(EXPRESSIONS)))
def test_text_and_values_match_real_torch(child, index):
    torch = _real_torch()
    result, _ = child
    expected = repr(eval(EXPRESSIONS[index], {"torch": torch}))
    assert result["reprs"][index] == expected, EXPRESSIONS[index]


def test_bfloat16_rounds_as_real_torch(child):
    torch = _real_torch()
    result, values = child
    bits = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).view(torch.int16)
    expected = [b & 0xFFFF for b in bits.tolist()]
    assert len(result["bf16"]) == len(values) > 200
    assert result["bf16"][:3] == [0x3F80, 0x3F80, 0x3F82]  # ties go to even
    assert result["bf16"] == expected
