"""`python3 scripts/run_matrix.py`, typed with a Python that has nothing installed, in a clean copy of the
checkout: the script provisions .venv-lab itself and the image checks run (never "No module named
testinfra" reported as failed tests). Marked `engine`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .test_embedding_doc import clean_copy

pytestmark = pytest.mark.engine
BARE = Path("/usr/bin/python3")  # Debian's own Python: no pytest, no testinfra, no packaging


def test_a_bare_system_python_runs_the_image_checks(tmp_path: Path) -> None:
    probe = subprocess.run([str(BARE), "-c", "import testinfra"], capture_output=True, check=False)
    assert probe.returncode != 0, f"{BARE} has testinfra installed: not a bare Python"
    root = clean_copy(tmp_path / "clone")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [str(BARE), "scripts/run_matrix.py", "--cell", "debian-bookworm-py3.11", "--suite", "images"],
        cwd=root, capture_output=True, text=True, timeout=900, env={**env, "CI": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lab: creating" in done.stderr and (root / ".venv-lab" / ".installed").is_file()
    data = json.loads((root / "matrix/results/latest/results.json").read_text())
    images = next(s for s in data["cells"][0]["suites"] if s["suite"] == "images")
    assert images["outcome"] == "passed" and images["tests"] >= 12, images
