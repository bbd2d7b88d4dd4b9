"""Flake history: each run's outcomes appended to RESULTS/history.jsonl, bounded, and each suite's flake rate over
its own last runs; a suite that flaked in 2 of its last 10 is named even when this run passed."""

from __future__ import annotations

from pathlib import Path

from matrix import history, report
from matrix.model import CellResult, Environment, Outcome, Suite, SuiteResult


def a_run(unit: Outcome, http: Outcome = Outcome.PASSED, *, cached: bool = False) -> list[CellResult]:
    suites = (SuiteResult(suite=Suite.UNIT, outcome=unit, tests=3, passed=3),
              SuiteResult(suite=Suite.HTTP, outcome=http, tests=3, passed=3, cached=cached),
              SuiteResult(suite=Suite.PAYLOAD, outcome=Outcome.NOT_RUN))  # fmt: skip
    return [CellResult(cell="c", outcome=Outcome.PASSED, suites=suites)]


def test_a_suite_that_flaked_in_2_of_its_last_10_runs_is_named_even_when_this_run_passed(tmp_path: Path) -> None:
    outcomes = [Outcome.FLAKY, Outcome.PASSED, Outcome.FLAKY, *[Outcome.PASSED] * 8]
    for n, unit in enumerate(outcomes):
        kept = history.append(tmp_path, history.entry(a_run(unit), run_id=f"run{n}", date="d", commit="x"))
    # 11 runs: the first flake has left unit's window of 10, so 1 of 10 is left, which is not named.
    assert [r.text for r in history.rates(kept)] == ["c unit: flaky in 1 of its last 10 runs"]
    kept = history.append(tmp_path, history.entry(a_run(Outcome.FLAKY), run_id="run11", date="d", commit="x"))
    flakes = history.rates(kept)
    assert [(r.flaky, r.runs, r.named) for r in flakes] == [(2, 10, True)]
    passed_now = a_run(Outcome.PASSED)
    assert "Flaky lately (2 or more of a suite's last 10 runs): c unit: flaky in 2 of its last 10 runs" in (
        report.to_table(passed_now, flakes=flakes))
    markdown = report.to_markdown(passed_now, Environment(), flakes=flakes)
    assert "Flaky lately" in markdown and "- c unit: flaky in 2 of its last 10 runs" in markdown
    assert "c unit: flaky in 2 of its last 10 runs" in report.to_html(passed_now, Environment(), flakes=flakes)


def test_only_suites_that_ran_count_and_the_file_is_bounded(tmp_path: Path) -> None:
    line = history.entry(a_run(Outcome.PASSED, Outcome.PASSED, cached=True), run_id="r", date="d", commit="x")
    assert line["outcomes"] == {"c/unit": "passed"}  # a remembered pass and a suite not run say nothing
    for n in range(history.HISTORY_RUNS + 5):
        kept = history.append(tmp_path, {**line, "run": f"r{n}"})
    assert len(kept) == history.HISTORY_RUNS == len((tmp_path / history.HISTORY_FILE).read_text().splitlines())
    assert kept[-1]["run"] == f"r{history.HISTORY_RUNS + 4}"
    with open(tmp_path / history.HISTORY_FILE, "a") as half:  # a run killed while writing: its line is skipped
        half.write('{"run": "cut sh')
    assert len(history.read(tmp_path)) == history.HISTORY_RUNS
