"""The scripts in examples/ run to completion (they assert their own results)."""
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def test_there_are_examples():
    assert len(SCRIPTS) >= 4


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script):
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], env=dict(os.environ),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout


def test_readme_python_snippet_runs(tmp_path):
    """The README's shortest example (its first python block) runs as shown."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "transfer_cache_async" in snippet
    script = tmp_path / "readme_snippet.py"
    script.write_text(snippet)
    out = subprocess.run([sys.executable, str(script)], env=dict(os.environ),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "LLM_SUCCESS" in out.stdout, out.stdout
