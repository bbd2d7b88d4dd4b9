"""The mcpserver portability lab: build images for a matrix of distributions and Pythons, run the suites
in each, check each image, and report. `scripts/run_matrix.py` is the command line (matrix/cli.py);
docs/guides/embedding.md and docs/adr/0001-lab-*.md, 0005-lab-*.md explain the choices."""

from pathlib import Path

LAB_ROOT = Path(__file__).resolve().parent.parent
"""The checkout the harness lives in: its tests/images, images/ and default cache and results."""
