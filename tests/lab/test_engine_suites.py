"""The install and conformance suites and the first answer against the real engine, on fixture trees (the stub
server, tiny suites, a minimal pyproject), through the real CLI; and the pytest volume a new set of wheels
needs. Marked `engine`."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from matrix.attempts import PYTEST_MOUNT, pytest_volume
from matrix.budgets import CPYTHON, budget_for
from matrix.engine import LABEL, ContainerSpec, Engine
from matrix.model import Suite
from matrix.wheels import MANIFEST

from .conftest import LAB_ROOT
from .test_engine import (
    CONTAINER_CELL,
    RUN_MATRIX,
    cell_of,
    lab_containers,
    left_behind,
    make_tree,
    run_matrix,
    suite_of,
)

pytestmark = pytest.mark.engine

PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "mcpserver"
version = "0.0.0+labfixture"
readme = "README.md"
requires-python = ">=3.9"

[project.scripts]
mcpserver = "mcpserver.cli:main"

[tool.setuptools]
package-dir = { "" = "server" }
packages = ["mcpserver"]
"""
INSTALL_TEST = '''import os, subprocess, sys

import mcpserver


def test_the_installed_copy_is_imported_and_its_script_runs():
    assert "site-packages" in mcpserver.__file__ or "dist-packages" in mcpserver.__file__, mcpserver.__file__
    script = os.path.join(os.environ["MCPLAB_SCRIPTS"], "mcpserver")
    assert subprocess.run([script], capture_output=True, text=True).stdout.strip() == "mcpserver 0.0.0+labfixture"
'''
FILES = {
    "pyproject.toml": PYPROJECT,
    "README.md": "The lab's fixture package.\n",
    "server/mcpserver/cli.py": "def main():\n    print('mcpserver 0.0.0+labfixture')\n",
    "tests/install/test_installed.py": INSTALL_TEST,
    # The fixture's own unit test asks `python -I` for mcpserver, which a user-site install cannot answer.
    "tests/unit/test_ok.py": "def test_arithmetic():\n    assert 1 + 1 == 2\n",
}


def test_install_builds_the_wheel_once_and_pip_installs_it_in_a_container_and_on_the_host(
    tmp_path: Path, engine: Engine
) -> None:
    # A readme of its own: a wheel no earlier run built, so this run builds and checks it (once).
    root = make_tree(tmp_path, {**FILES, "README.md": f"The lab's fixture package ({uuid.uuid4().hex}).\n"})
    before = lab_containers(engine)
    code, output, data = run_matrix(tmp_path, root, "--cell", f"{CONTAINER_CELL},fx-host-py3.11", "--suite", "install")
    assert code == 0, output
    for name in (CONTAINER_CELL, "fx-host-py3.11"):
        install = suite_of(cell_of(data, name), "install")
        assert install["outcome"] == "passed", install
        assert install["tests"] == 3  # test_installed, test_arithmetic, and the host's twine check
    logs = Path(data["environment"]["logs"])
    # Debian's python3.11 has no ensurepip: pip from its own wheel; pyenv's 3.11 has it: a venv.
    assert "mcplab-install: pip-wheel: mcpserver from /tmp/mcplab-install/user/" in (
        logs / f"{CONTAINER_CELL}-install.log").read_text()
    assert "mcplab-install: venv: mcpserver from " in (logs / "fx-host-py3.11-install.log").read_text()
    assert (logs / "dist.log").read_text().count("Successfully built") == 1  # once for both cells
    assert left_behind(engine, before, data["environment"]["run_id"]) == []
    # Run again, every suite anew: the same files are neither built nor checked by twine again.
    code, output, data = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "install", "--no-cache")
    assert code == 0, output
    assert not (Path(data["environment"]["logs"]) / "dist.log").exists()


def test_conformance_runs_the_official_suite_against_the_cells_published_server(tmp_path: Path,
                                                                                 engine: Engine) -> None:  # fmt: skip
    # The stub serves server/discover and echoes tools/call, and nothing else: most scenarios fail, which
    # is the point here: the verdict comes from the suite, with its counts, and nothing is left behind.
    root = make_tree(tmp_path, {"server/examples/everything.py": '"""Stand-in for the conformance fixture."""\n'})
    before = lab_containers(engine)
    code, output, data = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "conformance")
    conformance = suite_of(cell_of(data, CONTAINER_CELL), "conformance")
    assert code == 1 and conformance["outcome"] == "failed", output
    assert conformance["tests"] >= 37 and conformance["skipped"] >= 1 and conformance["failed"] >= 1
    assert all(f["test_id"].startswith("conformance.py::") for f in conformance["failures"])
    assert left_behind(engine, before, data["environment"]["run_id"]) == []


def test_the_first_answer_is_measured_in_the_cells_runtime_image(tmp_path: Path, engine: Engine) -> None:
    code, output, data = run_matrix(tmp_path, make_tree(tmp_path), "--cell", CONTAINER_CELL, "--suite", "unit")
    assert code == 0, output
    first = cell_of(data, CONTAINER_CELL)["first_answer"]
    assert first["error"] == "" and first["runs"] == 11, first
    assert first["bare_median_ms"] > 0 and 0 < first["median_ms"] < 5000
    assert "first answer" in (tmp_path / "results" / "latest" / "matrix.md").read_text()


def test_a_new_pytest_volume_is_filled_and_then_mounted_read_only(tmp_path: Path, engine: Engine) -> None:
    image = subprocess.run([*RUN_MATRIX, "--base", "debian-bookworm-py3.11"], capture_output=True, text=True,
                           check=True, cwd=LAB_ROOT).stdout.strip().splitlines()[-1]  # fmt: skip
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "marker.txt").write_text("filled\n")
    (folder / MANIFEST).write_text(json.dumps({"wheels": []}))
    name = f"mcplab-pytest-test-{uuid.uuid4().hex[:8]}"
    try:
        pytest_volume(engine, name, folder, image)
        spec = ContainerSpec(image=image, remove=True, volumes=((name, PYTEST_MOUNT),), labels={LABEL: "1"},
                             args=("sh", "-c", f"cat {PYTEST_MOUNT}/marker.txt; touch {PYTEST_MOUNT}/x"))  # fmt: skip
        done = engine.run(spec, timeout=120)
        # stdout and stderr come through one pipe in either order
        assert "filled" in done.output.splitlines() and "Read-only file system" in done.output, done.output
    finally:
        engine.remove_volumes(name)


def test_each_suite_is_measured_in_its_container_and_on_the_host_and_held_to_its_budget(tmp_path: Path,
                                                                                       engine: Engine) -> None:
    budget = budget_for(Suite.PAYLOAD, CPYTHON)  # both cells' interpreters are CPython 3.11
    size = budget.memory + 100_000_000
    big = f"def test_holds_more_than_the_budget():\n    data = b'x' * {size}\n    assert len(data) == {size}\n"
    root = make_tree(tmp_path, {"tests/payload/test_big.py": big})
    cells = f"{CONTAINER_CELL},fx-host-py3.11"
    code, output, data = run_matrix(tmp_path, root, "--cell", cells, "--suite", "unit,payload", "--retries", "0")
    assert code == 1, output
    for name, how in ((CONTAINER_CELL, "cgroup (memory/memory.max_usage_in_bytes"), ("fx-host-py3.11", "getrusage")):
        unit, payload = suite_of(cell_of(data, name), "unit"), suite_of(cell_of(data, name), "payload")
        assert unit["outcome"] == "passed" and how in unit["usage"]["measured_by"], unit
        assert 1_000_000 < unit["usage"]["peak_memory"] < size and unit["usage"]["cpu_time"] > 0
        assert payload["outcome"] == "failed" and payload["usage"]["peak_memory"] >= size, payload
        assert f"over the payload suite's CPython budget of {budget.memory_text}" in payload["message"]
    assert "Peak memory and CPU time of each suite" in (tmp_path / "results" / "latest" / "matrix.md").read_text()
