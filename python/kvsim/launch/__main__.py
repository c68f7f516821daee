"""python3 -m kvsim.launch: the launcher (kvsim launch)."""
import sys

from kvsim.launch.run import main

sys.exit(main())
