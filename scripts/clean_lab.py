#!/usr/bin/env python3
"""`make clean-lab`: remove everything the lab created and nothing else (matrix/clean.py says how)."""

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
runpy.run_module("matrix.clean", run_name="__main__")
