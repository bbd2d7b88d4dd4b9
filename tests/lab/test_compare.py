"""The "since the last full run" section: suites compared one by one with the last full run. Pure."""

from __future__ import annotations

from matrix import report
from matrix.compare import since_last_full
from matrix.model import CellResult, Environment, Outcome, Suite, SuiteResult

THEN = Environment(run_id="20261130000000-aaaaaa", commit="0123456789abcdef")


def cell(name: str, **suites: tuple[Outcome, float]) -> CellResult:
    found = tuple(SuiteResult(suite=Suite(s), outcome=o, duration=d, message=f"{s} said why; detail")
                  for s, (o, d) in suites.items())  # fmt: skip
    return CellResult(cell=name, outcome=Outcome.PASSED, suites=found)


P, F, E, FL = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.FLAKY


def test_newly_failing_passing_and_flaky_suites_are_named_with_what_they_were() -> None:
    previous = [cell("a", unit=(P, 10), http=(F, 10), payload=(P, 10)), cell("b", unit=(FL, 10)), cell("gone")]
    current = [cell("a", unit=(E, 10), http=(P, 10), payload=(FL, 10)), cell("b", unit=(P, 10)), cell("new")]
    since = since_last_full(current, previous, THEN)
    assert [c.text for c in since.failing] == ["a unit: passed -> error (unit said why)"]
    assert [c.text for c in since.passing] == ["a http: failed -> passed", "b unit: flaky -> passed"]
    assert [c.text for c in since.flaky] == ["a payload: passed -> flaky"]
    assert since.slower == ()
    assert since.heading == "Since the last full run (20261130000000-aaaaaa, commit 0123456789ab)"


def test_a_cell_is_markedly_slower_only_by_half_again_and_half_a_minute_more() -> None:
    previous = [cell("a", unit=(P, 100), http=(P, 20)), cell("b", unit=(P, 10)), cell("c", unit=(P, 100))]
    current = [cell("a", unit=(P, 160), http=(P, 20)), cell("b", unit=(P, 30)), cell("c", unit=(P, 140))]
    (slower,) = since_last_full(current, previous, THEN).slower
    assert slower.text.startswith("a: 120s -> 180s (1.5x")  # b: 3x but only 20s; c: 40s but only 1.4x
    unchanged = since_last_full(previous, previous, THEN)
    assert unchanged.lines() == ["nothing newly fails, passes or is flaky, and no cell got markedly slower"]


def test_a_cell_that_now_fails_before_any_suite_is_newly_failing_and_every_report_says_so() -> None:
    broken = CellResult(cell="a", outcome=Outcome.ERROR, message="docker build of the runtime stage failed; log")
    since = since_last_full([broken], [cell("a", unit=(P, 10))], THEN)
    assert [c.text for c in since.failing] == ["a: passed -> error (docker build of the runtime stage failed)"]
    assert "- newly failing: a: passed -> error" in report.to_markdown([broken], THEN, since=since)
    assert "<li>newly failing: a: passed -&gt; error" in report.to_html([broken], THEN, since=since)
    assert "newly failing: a: passed -> error" in report.to_table([broken], since=since)
    assert "Since the last full run" not in report.to_markdown([broken], THEN)
