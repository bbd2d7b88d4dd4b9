#!/usr/bin/env python3
"""Run the lab matrix: `python scripts/run_matrix.py --help`. The harness lives in matrix/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from matrix.cli import main

if __name__ == "__main__":
    sys.exit(main())
