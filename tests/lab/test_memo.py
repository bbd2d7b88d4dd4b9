"""Remembered passes: only passes are kept, they come back marked cached, and the key moves with inputs."""

from __future__ import annotations

from pathlib import Path

from matrix.memo import SuiteMemo, files_digest, memo_key
from matrix.model import Outcome, Suite, SuiteResult


def test_only_passes_are_remembered_and_come_back_marked(tmp_path: Path) -> None:
    memo = SuiteMemo(tmp_path)
    passed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=3, passed=3)
    failed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.FAILED, tests=3, passed=2, failed=1)
    memo.put("a", passed)
    memo.put("b", failed)
    assert memo.get("a") == SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=3, passed=3, cached=True)
    assert memo.get("b") is None
    assert memo.get("missing") is None
    assert SuiteMemo(tmp_path, enabled=False).get("a") is None
    assert "cached" in memo.get("a").counts  # type: ignore[union-attr]


def test_keys_move_with_any_input(tmp_path: Path) -> None:
    tree = tmp_path / "server"
    tree.mkdir()
    (tree / "x.py").write_text("a = 1\n")
    before = files_digest([tree])
    (tree / "x.py").write_text("a = 2\n")
    assert files_digest([tree]) != before
    assert memo_key("container", "sha256:1", "unit") != memo_key("container", "sha256:2", "unit")
    assert memo_key("container", "sha256:1", "unit") == memo_key("container", "sha256:1", "unit")


def test_records_travel_through_a_store_also_when_the_pass_was_remembered_earlier(tmp_path: Path) -> None:
    from matrix.engine import Engine
    from matrix.travel import Archives

    passed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=1, passed=1, produced_by="run-1")
    SuiteMemo(tmp_path / "here").put("k", passed)  # an earlier run on this machine, with no store
    folder = Archives(tmp_path / "ci-cache")
    assert SuiteMemo(tmp_path / "here", engine=Engine(), stores=(folder,)).get("k") is not None
    elsewhere = SuiteMemo(tmp_path / "there", engine=Engine(), stores=(folder,)).get("k")
    assert elsewhere is not None and elsewhere.cached and elsewhere.produced_by == "run-1"
