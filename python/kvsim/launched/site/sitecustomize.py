"""Run by every Python program kvsim launch starts as an OS process (its PYTHONPATH names this
directory): joins the program to the launch before its own code runs."""
import os

if os.environ.get("KVSIM_PYTHON_LAUNCHED"):
    from kvsim.launched import bootstrap
    bootstrap.run()
    del bootstrap
del os
