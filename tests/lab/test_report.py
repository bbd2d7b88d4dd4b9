"""Report rendering and the results round trip: records in, text out, no engine."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from matrix import records, report
from matrix.junit import merged
from matrix.model import (
    BaseMade,
    CellResult,
    EarlierAttempt,
    Environment,
    FirstAnswer,
    Outcome,
    Phase,
    Skip,
    Suite,
    SuiteResult,
    TestFailure,
    Usage,
)
from matrix.text import shorten

JUNIT_ONE_FAILURE = """<?xml version="1.0" encoding="utf-8"?><testsuites>
<testsuite name="pytest" tests="3" failures="1" errors="0" skipped="1">
<testcase classname="tests.unit.test_proto" name="test_ok" time="0.1"/>
<testcase classname="tests.unit.test_proto.TestTools" name="test_add[2-3]" time="0.1">
<failure message="assert 6 == 5">long traceback</failure></testcase>
<testcase classname="tests.unit.test_proto" name="test_skip" time="0"><skipped message="later"/></testcase>
</testsuite></testsuites>"""

ENV = Environment(engine="20.10.24", kernel="6.1", commit="abc123", date="2026-11-30T00:00:00+00:00",
                  run_id="20261130000000-abcdef", logs="/tmp/logs", dirty=("server/x.py",), duration=140.0,
                  bases=(BaseMade(image="mcplab/base:debian-bookworm-0123", how="bootstrapped", seconds=61.5,
                                  sha256="ab" * 32),))  # fmt: skip
FAILING_ID = "tests/unit/test_proto.py::TestTools::test_add[2-3]"


FIRST = FirstAnswer(runs=3, median_ms=58.0, bare_median_ms=22.0, samples_ms=(55.0, 58.0, 61.0),
                    bare_samples_ms=(21.0, 22.0, 23.0))  # fmt: skip


def results() -> list[CellResult]:
    """One cell of every outcome."""
    passed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=31, passed=31, junit_xml="")
    failed = SuiteResult(
        suite=Suite.UNIT,
        outcome=Outcome.FAILED,
        tests=3,
        passed=1,
        failed=1,
        skipped=1,
        failures=(TestFailure(test_id=FAILING_ID, message="assert 6 == 5", details="tb"),),
        skips=(Skip(test_id="tests/unit/test_proto.py::test_skip", reason="later"),),
        junit_xml=JUNIT_ONE_FAILURE,
    )
    timeout = SuiteResult(
        suite=Suite.UNIT, outcome=Outcome.TIMEOUT, message="did not finish within 5s", log_tail="hanging <here>"
    )
    not_run = SuiteResult(suite=Suite.HTTP, outcome=Outcome.NOT_RUN)
    made = [
        CellResult(cell="debian-bookworm-py3.11", outcome=Outcome.PASSED, duration=12.0, suites=(passed, not_run),
                   python_version="3.11.2", implementation="CPython", first_answer=FIRST, started=2.0,
                   phases=(Phase(name="base", seconds=1.0), Phase(name="suite unit", seconds=11.0))),
        CellResult(cell="debian-sid-py3.15", outcome=Outcome.FAILED, suites=(failed,), python_version="3.11.17",
                   implementation="PyPy 8.0.1", first_answer=FirstAnswer(error="the probe failed: boom")),
        CellResult(cell="debian-trixie-py3.13", outcome=Outcome.TIMEOUT, suites=(timeout,),
                   notes=("without gunicorn: no release of gunicorn (or of what it needs) serves python3.13",)),
        CellResult(cell="ubuntu-24.04-py3.12", outcome=Outcome.UNAVAILABLE, message="ubuntu:24.04: not present"),
        CellResult(
            cell="alpine-3.23-py3.12",
            outcome=Outcome.ERROR,
            message="docker build of the python stage failed",
            log_tail="E: boom",
        ),
        CellResult(cell="host-py3.14", outcome=Outcome.CANCELLED, message="not finished: the run was interrupted"),
        CellResult(cell="debian-sid-pypy3.11", outcome=Outcome.FLAKY, suites=(FLAKY,), duration=30.0),
        CellResult(cell="debian-bookworm-py3.11-s390x", outcome=Outcome.PASSED, suites=(passed,), duration=90.0,
                   python_version="3.11.2", implementation="CPython", machine="s390x", byteorder="big",
                   maxsize=2**63 - 1),
    ]
    return [replace(r, **placed(r.cell)) for r in made]


def placed(name: str) -> dict[str, str]:
    """Where a cell of the shipped table sits in the report's grid: its family, release, interpreter and arch."""
    *_, arch = name.rsplit("-", 1) if name.endswith("-s390x") else ("", "amd64")
    family, release, interpreter = name.removesuffix("-s390x").rsplit("-", 2) if name.count("-") >= 2 else (
        "host", "host", name.partition("-")[2])  # fmt: skip
    family, _, more = family.partition("-")
    return {"family": family, "release": (more + "-" if more else "") + release, "interpreter": interpreter,
            "arch": arch}


FLAKY = SuiteResult(
    suite=Suite.UNIT, outcome=Outcome.FLAKY, tests=4, passed=4, duration=20.0,
    usage=Usage(peak_memory=312_000_000, cpu_time=41.0, measured_by="the container's cgroup (memory.peak)"),
    earlier=(EarlierAttempt(outcome=Outcome.FAILED, duration=9.0, usage=Usage(peak_memory=300_000_000, cpu_time=9.0),
                            failures=(TestFailure(test_id="tests/unit/test_q.py::test_quick", message="0.18 > 0.1"),),
                            ),),
)  # fmt: skip


def test_counts_say_what_passed_failed_and_was_skipped_never_a_full_score() -> None:
    text = report.to_markdown(results(), ENV, suites=(Suite.UNIT, Suite.HTTP))
    row = "| `debian-bookworm-py3.11` | ✅ passed | amd64 | CPython 3.11.2 | 31 passed | — | 58 ms (2.6x) | 12s |"
    assert row in text
    assert "1 passed, 1 failed, 1 skipped ⚠ 33% skipped" in text
    assert "8 cells: 2 passed, 1 flaky, 1 failed, 1 error, 1 timeout, 1 unavailable, 1 cancelled." in text
    assert "`tests/unit/test_proto.py::TestTools::test_add[2-3]`: assert 6 == 5" in text


def test_every_rendering_names_the_interpreter_the_first_answer_and_every_skip_with_its_reason() -> None:
    table = report.to_table(results(), suites=(Suite.UNIT,))
    markdown = report.to_markdown(results(), ENV, suites=(Suite.UNIT,))
    page = report.to_html(results(), ENV, suites=(Suite.UNIT,))
    for text in (table, markdown, page):
        assert "PyPy 8.0.1 (3.11.17)" in text and "CPython 3.11.2" in text
        assert "58 ms (2.6x)" in text
    for text in (table, markdown):
        assert "debian-sid-py3.15 unit: 1 skipped: later (tests/unit/test_proto.py::test_skip)" in text
    assert "1 skipped, with the reasons" in page and "tests/unit/test_proto.py::test_skip: later" in page
    assert "the probe failed: boom" in page  # a failed measurement says why, in the cell's details
    free = CellResult(cell="c", outcome=Outcome.PASSED, python_version="3.14.2", implementation="CPython",
                      flavour="free-threaded")  # fmt: skip
    assert report.interpreter_text(free) == "CPython 3.14.2 free-threaded"
    stressed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=30, passed=30, repetitions=20)
    assert report.suite_text(stressed) == "30 passed (20 stress)"


def test_json_round_trip_is_lossless() -> None:
    text = records.to_json(results(), ENV, suites=(Suite.UNIT, Suite.HTTP))
    data = json.loads(text)
    assert data["schema"] == "mcplab-results/5"
    assert data["counts"]["failed"] == 1
    assert data["environment"]["engine"] == "20.10.24"
    back, env, suites = records.from_json(text)
    assert list(back) == results() and env == ENV and suites == (Suite.UNIT, Suite.HTTP)


def test_html_is_self_contained_and_escaped() -> None:
    page = report.to_html(results(), ENV)
    for r in results():
        assert f"id='{r.cell}'" in page
    assert "hanging &lt;here&gt;" in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "<details><summary>tests/unit/test_proto.py::TestTools::test_add[2-3]</summary>" in page


def test_junit_merges_one_testsuite_per_cell_and_suite() -> None:
    root = ET.fromstring(merged(results()))
    names = [s.get("name") for s in root.iter("testsuite")]
    assert names == [
        "debian-bookworm-py3.11/unit",
        "debian-sid-py3.15/unit",
        "debian-trixie-py3.13/unit",
        "ubuntu-24.04-py3.12",
        "alpine-3.23-py3.12",
        "host-py3.14",
        "debian-sid-pypy3.11/unit",
        "debian-bookworm-py3.11-s390x/unit",
    ]
    sid = next(s for s in root.iter("testsuite") if s.get("name") == "debian-sid-py3.15/unit")
    assert sid.find("testcase/failure") is not None
    s390x = next(s for s in root.iter("testsuite") if s.get("name") == "debian-bookworm-py3.11-s390x/unit")
    facts = {p.get("name"): p.get("value") for p in s390x.iter("property")}
    assert facts == {"arch": "s390x", "machine": "s390x", "byteorder": "big", "maxsize": str(2**63 - 1)}


def test_table_lists_failures_last_where_a_log_tail_shows_them_and_the_verdict_names_each_cell() -> None:
    table = report.to_table(results(), suites=(Suite.UNIT,))
    assert "debian-sid-py3.15: failed: unit: 1 of 2 failed" in table
    assert "    unit: tests/unit/test_proto.py::TestTools::test_add[2-3]: assert 6 == 5" in table
    lines = table.splitlines()
    failing = lines.index("debian-sid-py3.15: failed: unit: 1 of 2 failed")
    assert all(not line.startswith(("skipped: ", "warning: ")) for line in lines[failing:]), table
    said = report.verdict(results())
    for cell in (f"debian-sid-py3.15 failed (unit: 1 of 2 failed: {FAILING_ID})", "debian-trixie-py3.13 timeout",
                 "alpine-3.23-py3.12 error", "host-py3.14 cancelled"):
        assert cell in said, said
    assert "debian-sid-pypy3.11" not in said and "ubuntu" not in said  # flaky and unavailable do not fail a run
    assert report.verdict(results()[:1]) == ""


def test_the_same_skip_in_many_cells_is_one_line_naming_them() -> None:
    skip = Skip(test_id="tests/unit/test_x.py::test_pypy", reason="the nursery is PyPy's")
    suite = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=2, passed=1, skipped=1, skips=(skip,))
    other = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=2, passed=1, skipped=1,
                        skips=(replace(skip, reason="another reason"),))  # fmt: skip
    cells = [CellResult(cell=name, outcome=Outcome.PASSED, suites=(suite,)) for name in ("host-py3.10", "host-py3.11")]
    cells.append(CellResult(cell="host-py3.12", outcome=Outcome.PASSED, suites=(other,)))
    assert report.skipped_lines(cells) == [
        "host-py3.10, host-py3.11 unit: 1 skipped: the nursery is PyPy's (tests/unit/test_x.py::test_pypy)",
        "host-py3.12 unit: 1 skipped: another reason (tests/unit/test_x.py::test_pypy)",
    ]


def test_write_reports_atomically_and_to_step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    written = report.write_reports(results(), ENV, tmp_path / "out")
    assert sorted(written) == sorted(report.REPORT_FILES)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")], "no temp files left"
    assert "| cell | outcome |" in summary.read_text()
    back, _, _ = records.read_results(tmp_path / "out")
    assert [r.cell for r in back] == [r.cell for r in results()]


def test_every_link_has_its_anchor_and_every_report_names_its_tree() -> None:
    page = report.to_html(results(), ENV)
    links = set(re.findall(r"href='#([^']+)'", page))
    anchors = set(re.findall(r"id='([^']+)'", page))
    assert links and links <= anchors, sorted(links - anchors)
    for text in (page, report.to_markdown(results(), ENV)):
        assert "abc123 plus uncommitted changes (dirty: server/x.py)" in text
        assert "Run 20261130000000-abcdef" in text and "/tmp/logs" in text


def test_a_partial_report_says_so_and_cached_results_say_where_from() -> None:
    cached = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=1, passed=1, cached=True,
                         produced_by="20261129000000-123456", produced_at="2026-11-29T00:00:00+00:00")  # fmt: skip
    one = [CellResult(cell="host-py3.11", outcome=Outcome.PASSED, suites=(cached,))]
    env = replace(ENV, partial="interrupted (the run was interrupted by SIGINT)")
    page = report.to_html(one, env)
    assert "PARTIAL REPORT: interrupted" in page and "PARTIAL REPORT" in report.to_markdown(one, env)
    assert "cached: passed in run 20261129000000-123456 at 2026-11-29T00:00:00+00:00" in page


def test_reports_are_world_readable_and_runs_keep_their_own_folders(tmp_path: Path) -> None:
    first, second = tmp_path / "20261130000000-aaaaaa", tmp_path / "20261130000001-bbbbbb"
    for folder in (first, second):
        report.write_reports(results(), ENV, folder)
        report.point(tmp_path / records.LATEST, folder)
    for name in report.REPORT_FILES:
        assert (first / name).stat().st_mode & 0o777 == 0o644
    assert (tmp_path / records.LATEST).resolve() == second
    assert records.results_file(tmp_path) == tmp_path / records.LATEST / "results.json"
    (tmp_path / records.LATEST).unlink()  # an artifact upload may drop the link
    assert records.results_file(tmp_path) == second / "results.json"


def test_a_flaky_suite_shows_as_flaky_with_the_failure_of_the_run_that_failed() -> None:
    assert report.suite_text(FLAKY) == "flaky 4 passed (run 1: 1 failed)"
    markdown = report.to_markdown(results(), ENV, suites=(Suite.UNIT,))
    assert "| `debian-sid-pypy3.11` | 🔁 flaky |" in markdown
    assert "- `debian-sid-pypy3.11` unit (run 1 of 2): `tests/unit/test_q.py::test_quick`: 0.18 > 0.1" in markdown
    table = report.to_table(results(), suites=(Suite.UNIT,))
    assert "debian-sid-pypy3.11: flaky: unit: flaky: run 1: 1 failed; passed on run 2" in table
    assert "    unit (run 1 of 2): tests/unit/test_q.py::test_quick: 0.18 > 0.1" in table
    page = report.to_html(results(), ENV, suites=(Suite.UNIT,))
    assert "<summary>run 1: tests/unit/test_q.py::test_quick</summary>" in page and "class=flaky" in page


@pytest.mark.parametrize("limit", [10, 40, 61, 200])
def test_reasons_are_shortened_between_words_never_inside_one(limit: int) -> None:
    reason = ("the apt mirror lists python3.14 source versions 3.14.10-1 and 3.14.9-1 but serves none of their "
              "files (docker build of the builder stage; log: /work/.cache/lab/logs/20261201-abc/build-x.log)")
    short = shorten(reason, limit)
    words = set(reason.split())
    assert all(word in words for word in short.removesuffix(" …").split())
    assert short == reason or short.endswith(" …")
    assert shorten("short", limit) == "short"


def test_every_report_has_each_suites_peak_memory_and_cpu_time_beside_its_budget() -> None:
    over = replace(FLAKY, suite=Suite.PAYLOAD, outcome=Outcome.FAILED, over_budget="peak memory ... over", earlier=())
    cells = [*results(), CellResult(cell="debian-trixie-pypy3.11", outcome=Outcome.FAILED, suites=(over,))]
    markdown = report.to_markdown(cells, ENV, suites=(Suite.UNIT, Suite.PAYLOAD))
    assert "| budget, CPython | 2,000 MB, 1800s CPU | 60 x 5 MB (300 MB), 600s CPU |" in markdown
    said = "CPython budgets assume: servers pin glibc's mmap threshold at 64 KiB after a large message"
    assert f"- {said}" in markdown
    assert "| `debian-sid-pypy3.11` | 312 MB, 41s CPU | — |" in markdown
    assert "| `debian-trixie-pypy3.11` | — | ⚠ 312 MB, 41s CPU |" in markdown
    assert report.suite_text(over) == "4 passed, over budget"
    table = report.to_table(cells, suites=(Suite.UNIT, Suite.PAYLOAD))
    assert "peak memory and CPU time per suite:" in table and said in table
    assert re.search(r"debian-trixie-pypy3\.11 +— +⚠ 312 MB, 41s CPU", table)
    page = report.to_html(cells, ENV, suites=(Suite.UNIT, Suite.PAYLOAD))
    assert "<h2>Peak memory and CPU time</h2>" in page and "⚠ 312 MB, 41s CPU" in page and html.escape(said) in page
    back, _, _ = records.from_json(records.to_json(cells, ENV))
    assert back[-1].suites[0].usage == FLAKY.usage and back[-1].suites[0].over_budget


def test_a_suite_near_its_containers_memory_limit_is_a_warning_in_every_report_even_when_it_passed() -> None:
    near = replace(FLAKY, suite=Suite.PAYLOAD, outcome=Outcome.PASSED, earlier=(),
                   near_limit="peak memory 3,947 MB is within 10% of its container's limit of 4,295 MB")
    cells = [CellResult(cell="debian-trixie-pypy3.11", outcome=Outcome.PASSED, suites=(near,))]
    said = "debian-trixie-pypy3.11 payload: peak memory 3,947 MB is within 10%"
    assert f"warning: {said}" in report.to_table(cells, suites=(Suite.PAYLOAD,))
    assert f"- ⚠ {said}" in report.to_markdown(cells, ENV, suites=(Suite.PAYLOAD,))
    assert "⚠ peak memory 3,947 MB is within 10%" in report.to_html(cells, ENV, suites=(Suite.PAYLOAD,))
    assert report.usage_text(near).endswith(", near the limit") and report.usage_text(near).startswith("⚠")
    back, _, _ = records.from_json(records.to_json(cells, ENV))
    assert back[0].suites[0].near_limit == near.near_limit


def test_the_html_report_opens_with_the_shape_of_the_matrix_and_folds_the_unavailable_cells() -> None:
    page = report.to_html(results(), ENV)
    top = page[: page.index("<table><tr><th>cell</th>")]  # above the table of cells that ran
    assert [h for h in re.findall(r"<div class=panel><h3>([^<]+)</h3>", top)] == ["amd64", "s390x"]
    for r in results():
        assert top.count(f"<a href='#{html.escape(r.cell)}' class='sq {r.outcome.value}'") == 1, r.cell
        assert page.count(f"id='{html.escape(r.cell)}'") == 1, r.cell  # the row each square links to
    assert "<svg class=chart" in top and "<title>debian-sid-pypy3.11: 30s</title>" in top
    assert "<script" not in page and "http://" not in page and "https://" not in page
    folded = page[page.index("<details class=gone>") :]
    assert folded.startswith("<details class=gone><summary>1 unavailable cells, with their reasons</summary>")
    assert "id='ubuntu-24.04-py3.12'" in folded[: folded.index("</details>")]
    ran = page[page.index("<table><tr><th>cell</th>") : page.index("<details class=gone>")]
    assert "ubuntu-24.04-py3.12" not in ran and "s390x (s390x, big-endian, 64-bit)" in ran


def test_the_reports_say_where_the_time_went_and_give_each_base_made_with_its_digest() -> None:
    markdown = report.to_markdown(results(), ENV)
    assert "Where the time went: 140 s wall: 12 s of cell phases side by side" in markdown
    assert "| suite unit | 1 | 11 | `debian-bookworm-py3.11` 11 s |" in markdown
    assert "| `debian-bookworm-py3.11` | 2 | 1 | 0 | 0 | 11 | 0 | 12 |" in markdown
    assert f"mcplab/base:debian-bookworm-0123: bootstrapped, 62 s, tarball sha256 {'ab' * 32}" in markdown


def test_a_cell_without_an_add_on_says_so_in_every_rendering() -> None:
    said = "without gunicorn: no release of gunicorn (or of what it needs) serves python3.13"
    for text in (report.to_markdown(results(), ENV), report.to_table(results()), report.to_html(results(), ENV)):
        assert said in text


def test_the_grid_shows_every_cell_of_the_table_with_a_panel_per_architecture() -> None:
    from matrix.table import load_cells

    table = load_cells()
    ran = [r for r in results() if r.cell == "debian-bookworm-py3.11"]
    page = report.to_html(ran, ENV, table=table)
    for arch in ("amd64", "i386", "arm64", "s390x", "riscv64"):
        assert f"<h3>{arch}</h3>" in page, arch
    assert page.count("class='sq ") == len(table)  # every cell, the one that ran among them
    assert "title='debian-bookworm-py3.11-s390x: not run (not selected)'" in page
    assert "<span class=not-run>not run</span>" in page  # in the legend, in its own colour
    markdown = report.to_markdown(ran, ENV, table=table)
    assert "| `debian-bookworm-py3.11-s390x` | ▫️ not run |" in markdown
    assert f"1 cells: 1 passed. {len(table) - 1} more in the table, not selected by this run." in markdown
