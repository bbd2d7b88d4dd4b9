"""The suites as a table: a runner per suite and place, whose memo key is derived from exactly the fields it
declares. Changing any declared input misses a remembered pass; changing anything else does not. Pure, but
for the memo's own files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from matrix.build import Images
from matrix.install import Distribution
from matrix.memo import SuiteMemo
from matrix.model import SUITES, Outcome, Suite, SuiteResult
from matrix.processes import Completed
from matrix.suites import (
    DECLARED,
    IN_CONTAINER,
    ON_HOST,
    ContainerCell,
    HostCell,
    PytestFolder,
    Runner,
    harness_digest,
)
from matrix.table import parse_cells

(CELL,) = parse_cells({"schema": 1, "cell": [{"name": "fx", "family": "debian", "release": "sid", "python": "3.13",
                                              "flavour": "free-threaded", "base": "debian:sid", "stress": 3,
                                              "python_from": "distro"}]})  # fmt: skip
(HOST,) = parse_cells({"schema": 1, "cell": [{"name": "fx-host", "family": "host", "release": "host",
                                              "python": "3.11", "python_from": "host"}]})  # fmt: skip


def tree(root: Path) -> Path:
    for rel in ("tests/unit/test_a.py", "tests/http/test_b.py", "tests/install/test_c.py", "tests/conftest.py",
                "tests/payload/test_d.py", "tests/hostile/test_e.py", "server/examples/everything.py"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "dist").mkdir()
    (root / "dist/mcpserver-1-py3-none-any.whl").write_bytes(b"wheel")
    return root


def made(root: Path) -> Distribution:
    return Distribution(wheel=root / "dist/mcpserver-1-py3-none-any.whl", sdist=root / "dist/mcpserver-1.tar.gz",
                        twine=Completed(returncode=0, output="PASSED"))  # fmt: skip


def runners(root: Path) -> list[Runner]:
    """One runner of every kind, from what a container cell and a host cell have."""
    images = Images(python="t:python", runtime="t:runtime", test="t:test", install="t:install")
    ids = Images(python="sha256:p", runtime="sha256:r", test="sha256:t", install="sha256:i")
    pytest_folder = PytestFolder(folder=root / "py3.13", volume="mcplab-pytest-py3.13-abc", wheels="a.whl,b.whl",
                                 pip="pip.whl")  # fmt: skip
    container = ContainerCell(cell=CELL, images=images, ids=ids, pytest=pytest_folder, distribution=lambda: made(root))
    host = HostCell(cell=HOST, interpreter="/usr/bin/python3.11", venv_python=root / "venv/bin/python", code="c0de",
                    pytest=pytest_folder, root=root, distribution=lambda: made(root))  # fmt: skip
    return [make(container, suite) for suite, make in IN_CONTAINER.items()] + [
        make(host, suite) for suite, make in ON_HOST.items()]  # fmt: skip


def test_every_suite_has_one_runner_in_each_place_it_applies_to() -> None:
    assert tuple(IN_CONTAINER) == SUITES == CELL.suites
    assert tuple(ON_HOST) == HOST.suites == tuple(s for s in SUITES if s.for_hosts)


def changed(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, Suite):
        return next(s for s in Suite if s is not value)
    if isinstance(value, tuple):
        return (*value, ("X", "1"))
    if isinstance(value, Path):
        return value / "elsewhere"
    return f"{value}-changed"


def test_changing_any_declared_input_misses_the_cache_and_nothing_else_does(tmp_path: Path) -> None:
    for n, runner in enumerate(runners(tree(tmp_path / "tree"))):
        memo = SuiteMemo(tmp_path / f"passed-{n}")  # this runner's pass only
        memo.put(runner.key, SuiteResult(suite=runner.suite, outcome=Outcome.PASSED, tests=1, passed=1))
        assert memo.get(runner.key) is not None
        for f in dataclasses.fields(runner):
            other = dataclasses.replace(runner, **{f.name: changed(getattr(runner, f.name))})
            where = f"{type(runner).__name__}.{f.name}"
            if f.metadata == DECLARED:
                assert other.key != runner.key and memo.get(other.key) is None, f"{where} is not in the key"
            else:
                assert other.key == runner.key, f"{where} is not declared, yet the key moved"


def test_what_a_host_runner_declares_moves_with_the_files_it_reads(tmp_path: Path) -> None:
    root = tree(tmp_path / "tree")
    before = {type(r).__name__ + r.suite.value: r.key for r in runners(root)}
    (root / "tests/unit/test_a.py").write_text("# changed\n")  # tests/unit: what the unit and install suites run
    after = {type(r).__name__ + r.suite.value: r.key for r in runners(root)}
    moved = sorted(name for name in before if before[name] != after[name])
    assert moved == ["HostPytestunit", "InstallOnHostinstall"]  # the image's suites move with the image's ID


def test_the_harness_digest_follows_the_code_that_makes_and_judges_an_attempt(tmp_path: Path) -> None:
    copy = tmp_path / "outcomes.py"
    copy.write_text("def judge(): ...\n")
    first = harness_digest((copy,))
    copy.write_text("def judge(): return 1\n")
    assert harness_digest.__wrapped__((copy,)) != first  # type: ignore[attr-defined]


@pytest.mark.parametrize("suite", [Suite.UNIT, Suite.HTTP, Suite.PAYLOAD])
def test_only_the_concurrency_suites_of_a_stressed_cell_run_stressed(suite: Suite, tmp_path: Path) -> None:
    in_images = runners(tree(tmp_path / "tree"))[: len(IN_CONTAINER)]  # the stressed cell's; the host cell is not
    env = {r.suite: {k: v for k, v in getattr(r, "env", ()) if k != "MCPLAB_CELL"}
           for r in in_images if r.suite is suite}
    expected = {"MCPSERVER_STRESS": "3"} if suite is not Suite.PAYLOAD else {}
    assert env[suite] == expected
