"""Checks an installed kvsim (ctest python_install): the packages import from the install prefix
alone, the presets, models, scenario library and reports they carry are the ones used, and the
installed kvsim program launches programs with the installed packages."""
import os
import subprocess
import sys
import tempfile

import kvsim
import llm_datadist

prefix = os.path.realpath(sys.argv[1])
for module in (kvsim, llm_datadist):
    assert os.path.realpath(module.__file__).startswith(prefix), module.__file__
for path in (kvsim.library_dir(), kvsim.reports_dir(), os.environ["KVSIM_MODELS"]):
    assert os.path.realpath(path).startswith(prefix), path
with tempfile.TemporaryDirectory() as out:
    result = kvsim.run("pa-block128", set={"workload.requests": 1}, out_dir=out)
    assert result.ok, result.summary
    assert os.path.exists(os.path.join(out, "index.html")), os.listdir(out)
# The installed kvsim program finds the installed launcher (no PYTHONPATH), which hosts a
# program that uses the installed torch shims and llm_datadist.
env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
program = ("import torch, llm_datadist, kvsim.hosting; "
           "print(torch.ones(2).npu().device, kvsim.hosting.__file__.startswith(" + repr(prefix) +
           "))")
done = subprocess.run([os.path.join(prefix, "bin", "kvsim"), "launch", "--", "python3", "-c",
                       program], capture_output=True, text=True, env=env, timeout=120)
assert done.returncode == 0, done.stdout + done.stderr
assert done.stdout == "[p0] npu:0 True\n", done.stdout
print("installed kvsim OK:", prefix)
