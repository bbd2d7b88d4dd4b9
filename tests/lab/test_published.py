"""What the repository shows of the lab is written by a run: docs/matrix.md has a row for every cell of the table
and no other, and README.md's summary, docs/matrix.md and docs/img/report.png name the same run of the same commit.
`make matrix-publish` writes them (matrix/publish.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from matrix import publish, report
from matrix.exits import Exit
from matrix.model import CellResult, Environment, Outcome
from matrix.table import load_cells

from .conftest import LAB_ROOT

NAMED = re.compile(r"run \d{14}-[0-9a-f]{6} of commit [0-9a-f]{12} \([^)]+\)")


def test_the_published_report_has_every_cell_of_the_table_and_no_other() -> None:
    published = publish.published_cells((LAB_ROOT / publish.MATRIX_MD).read_text(encoding="utf-8"))
    assert published == [cell.name for cell in load_cells()], "docs/matrix.md is stale: run `make matrix-publish`"


def test_the_readme_the_report_and_its_picture_name_the_same_run() -> None:
    readme = (LAB_ROOT / publish.README).read_text(encoding="utf-8")
    block = readme[readme.index(publish.START) : readme.index(publish.END)]
    (run,) = NAMED.findall(block)
    assert run in (LAB_ROOT / publish.MATRIX_MD).read_text(encoding="utf-8").split("\n", 3)[2]
    texts = publish.png_texts((LAB_ROOT / publish.REPORT_PNG).read_bytes())
    assert texts.get("Comment") == f"mcpserver lab: {run}"
    assert "| cell |" not in block, "the README keeps a summary of a few lines, not the table"


WHOLE = Environment(commit="0123456789abcdef0123", run_id="20261207120000-abcdef", date="2026-12-07T12:00:00+00:00",
                    host="Linux x86_64", duration=1500.0)  # fmt: skip


@pytest.mark.parametrize(("env", "code", "why"), [
    (Environment(subset="--cell debian-*"), Exit.PASSED, "only a whole run is published"),
    (Environment(partial="interrupted"), Exit.PASSED, "only a whole run is published"),
    (Environment(shard="1/4"), Exit.PASSED, "only a whole run is published"),
    (Environment(commit="abc", dirty=("server/x.py",)), Exit.PASSED, "uncommitted changes (server/x.py)"),
    (Environment(commit="abc"), Exit.FAILED, "the run did not pass (exit 1)"),
])  # fmt: skip
def test_only_a_whole_passed_run_of_a_committed_tree_is_published(env: Environment, code: Exit, why: str) -> None:
    assert why in publish.refusal(env, code)
    assert publish.refusal(WHOLE, Exit.PASSED) == ""


def test_a_publication_rewrites_the_summary_block_and_the_report_and_names_its_run(tmp_path: Path,
                                                                                   monkeypatch) -> None:  # fmt: skip
    table = load_cells()
    results = [CellResult(cell=c.name, outcome=Outcome.PASSED, arch="amd64") for c in table if not c.opt_in]
    (tmp_path / "docs/img").mkdir(parents=True)
    (tmp_path / "README.md").write_text(f"# x\n\nbefore\n{publish.START}\nold table\n{publish.END}\nafter\n")
    report.write_reports(results, WHOLE, tmp_path / "run", table=table)
    png = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\0IEND\xaeB`\x82"
    monkeypatch.setattr(publish, "screenshot", lambda page, processes: png)
    publish.publish(tmp_path, tmp_path / "run", results, WHOLE, table, None)  # type: ignore[arg-type]
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# x\n\nbefore\n") and readme.endswith("\nafter\n") and "old table" not in readme
    assert "run 20261207120000-abcdef of commit 0123456789ab" in readme and "opt-in cells not run" in readme
    markdown = (tmp_path / "docs/matrix.md").read_text()
    assert publish.published_cells(markdown) == [c.name for c in table]
    assert publish.png_texts((tmp_path / "docs/img/report.png").read_bytes()) == {
        "Comment": f"mcpserver lab: {publish.named(WHOLE)}"}
