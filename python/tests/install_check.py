"""Checks an installed kvsim (ctest python_install): the packages import from the install prefix
alone, and the presets, models, scenario library and reports they carry are the ones used."""
import os
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
print("installed kvsim OK:", prefix)
