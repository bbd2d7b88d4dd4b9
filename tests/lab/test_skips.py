"""A skip is not a pass: a whole run in which some test was skipped in every cell that collected it fails and names
the test; a run of some cells names it without failing; the tests left out as host-only are named once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from matrix import report, skips
from matrix.exits import Exit
from matrix.model import CellResult, Environment, Outcome, Suite, SuiteResult
from matrix.outcomes import exit_code

from .conftest import LAB_ROOT

RAN_BY_BOTH = '<testcase classname="tests.unit.test_a" name="test_everywhere"/>'


def junit(*cases: str, host_only: tuple[str, ...] = ()) -> str:
    properties = "".join(f'<property name="{skips.HOST_ONLY}" value="{value}"/>' for value in host_only)
    return (f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="{len(cases)}">'
            f"<properties>{properties}</properties>{''.join(cases)}</testsuite></testsuites>")  # fmt: skip


def skipped(name: str, reason: str, classname: str = "tests.unit.test_a") -> str:
    return f'<testcase classname="{classname}" name="{name}"><skipped message="{reason}">x</skipped></testcase>'


def ran(name: str, classname: str = "tests.unit.test_a") -> str:
    return f'<testcase classname="{classname}" name="{name}"/>'


def cell(name: str, *cases: str, outcome: Outcome = Outcome.PASSED, host_only: tuple[str, ...] = ()) -> CellResult:
    unit = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=len(cases), junit_xml=junit(*cases,
                       host_only=host_only))  # fmt: skip
    return CellResult(cell=name, outcome=outcome, suites=(unit,))


def test_a_test_every_cell_skipped_ran_nowhere_and_one_any_cell_ran_did_not() -> None:
    results = [
        cell("pypy", RAN_BY_BOTH, skipped("test_needs_gunicorn", "gunicorn is not installed"), ran("test_pypy_only")),
        cell("cpython", RAN_BY_BOTH, skipped("test_needs_gunicorn", "gunicorn is not installed here"),
             skipped("test_pypy_only", "the nursery is PyPy's")),
        cell("alpine", skipped("test_never", "no mirror"), outcome=Outcome.UNAVAILABLE),  # never ran: not counted
    ]  # fmt: skip
    (found,) = skips.ran_nowhere(results)
    assert found.test_id == "tests/unit/test_a.py::test_needs_gunicorn" and found.cells == ("cpython", "pypy")
    assert found.text == ("tests/unit/test_a.py::test_needs_gunicorn: skipped in all 2 cells that collected it "
                          "(gunicorn is not installed; gunicorn is not installed here)")  # fmt: skip
    assert exit_code(results, ran_nowhere=1) is Exit.FAILED and exit_code(results) is Exit.PASSED


def test_the_official_conformance_suites_scenarios_that_exercise_nothing_are_its_own() -> None:
    scenario = skipped("tasks-status-notifications", "not exercised", classname="conformance.2026-07-28")
    result = cell("one", RAN_BY_BOTH)
    conformance = SuiteResult(suite=Suite.CONFORMANCE, outcome=Outcome.PASSED, tests=1, junit_xml=junit(scenario))
    assert skips.ran_nowhere([CellResult(cell="one", outcome=Outcome.PASSED,
                                         suites=(*result.suites, conformance))]) == []  # fmt: skip


def test_a_module_one_cell_skipped_whole_ran_where_any_of_its_tests_ran() -> None:
    whole = '<testcase classname="" name="tests.http.test_http_tls"><skipped message="collection skipped">x</skipped>'
    results = [cell("musl", whole + "</testcase>"), cell("glibc", ran("test_handshake", "tests.http.test_http_tls"))]
    assert skips.ran_nowhere(results) == []
    (found,) = skips.ran_nowhere(results[:1])
    assert found.test_id == "tests/http/test_http_tls.py"


def test_stress_repetitions_are_one_test() -> None:
    results = [cell("ft", ran("test_race[stress0-seed1]"), skipped("test_race[stress1-seed2]", "slow")),
               cell("gil", skipped("test_race", "no threads"))]  # fmt: skip
    assert skips.ran_nowhere(results) == []


def test_only_a_whole_run_is_judged_by_it() -> None:
    assert skips.judged(Environment())
    assert skips.judged(Environment(shard="merged 4 shards"))
    assert not skips.judged(Environment(subset="--cell debian-*"))
    assert not skips.judged(Environment(shard="2/4")) and not skips.judged(Environment(partial="interrupted"))


def test_the_reports_name_the_tests_that_ran_nowhere_and_the_host_only_ones_once() -> None:
    left_out = ("tests/unit/test_readme.py::test_quick_start: reads the README",)
    results = [cell(name, RAN_BY_BOTH, skipped("test_needs_gunicorn", "no gunicorn"), host_only=left_out)
               for name in ("one", "two")]  # fmt: skip
    assert skips.host_only(results) == {"tests/unit/test_readme.py::test_quick_start": "reads the README"}
    whole = report.to_markdown(results, Environment())
    assert "Ran nowhere (1): skipped in every cell that collected them, which fails a whole run:" in whole
    said = "tests/unit/test_a.py::test_needs_gunicorn: skipped in all 2 cells that collected it (no gunicorn)"
    assert f"- `{said}`" in whole
    assert whole.count("test_quick_start") == 1 and "Host-only (1): not collected in any cell" in whole
    some = report.to_table(results, env=Environment(subset="--cell one,two"))
    assert "Skipped in every cell of this run (1; it was limited: --cell one,two)" in some
    page = report.to_html(results, Environment())
    assert "Ran nowhere (1)" in page and "test_quick_start" in page


def write_shard(folder: Path, shard: str, result: CellResult) -> Path:
    report.write_reports([result], Environment(commit="abc", plan="p", shard=shard, run_id=f"r{shard[0]}"), folder)
    return folder


def test_a_whole_run_with_a_test_no_cell_ran_fails_and_names_it(tmp_path: Path) -> None:
    """Through the command line: the shards of one whole run, merged, fail on the test both cells skipped."""
    one = write_shard(tmp_path / "one", "1/2", cell("host-py3.9", RAN_BY_BOTH, skipped("test_x", "no prometheus")))
    two = write_shard(tmp_path / "two", "2/2", cell("host-py3.10", RAN_BY_BOTH, skipped("test_x", "no prometheus")))
    argv = [sys.executable, str(LAB_ROOT / "scripts/run_matrix.py"), "--merge", str(one), str(two), "--results"]
    done = subprocess.run([*argv, str(tmp_path / "merged")], capture_output=True, text=True, timeout=120)
    assert done.returncode == Exit.FAILED, done.stdout + done.stderr
    assert "tests/unit/test_a.py::test_x: skipped in all 2 cells that collected it (no prometheus)" in done.stdout
    two = write_shard(tmp_path / "two", "2/2", cell("host-py3.10", RAN_BY_BOTH, ran("test_x")))
    done = subprocess.run([*argv, str(tmp_path / "merged")], capture_output=True, text=True, timeout=120)
    assert done.returncode == Exit.PASSED, done.stdout + done.stderr
