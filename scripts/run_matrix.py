#!/usr/bin/env python3
"""Run the lab matrix: `python3 scripts/run_matrix.py --help`. The harness lives in matrix/.

Any Python 3.10+ will do: a run that needs pytest, pytest-testinfra or packaging and does not have them
provisions .venv-lab (the `lab` extra of pyproject.toml) and runs itself again there, as nox and tox do.
"""

import sys
from pathlib import Path

if sys.version_info < (3, 10):
    sys.exit(f"run_matrix: the lab's harness needs Python 3.10 or newer; this is {sys.version.split()[0]}.")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from matrix.cli import main, needs_host_tools
from matrix.venv import reexec_in_lab_venv

if __name__ == "__main__":
    if needs_host_tools(sys.argv[1:]):
        reexec_in_lab_venv(sys.argv)
    sys.exit(main())
