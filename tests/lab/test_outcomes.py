"""The outcome rules: a pytest run to a suite outcome, suites to a cell's, cells to the exit code. Pure."""

from __future__ import annotations

import pytest

from matrix.model import CellResult, Outcome, Suite, SuiteResult
from matrix.outcomes import (
    Attempt,
    cancelled_if_interrupted,
    cell_outcome,
    exit_code,
    judge,
    pytest_outcome,
    should_stop,
)

from .test_report import JUNIT_ONE_FAILURE


def suite(outcome: Outcome, name: Suite = Suite.UNIT) -> SuiteResult:
    return SuiteResult(suite=name, outcome=outcome)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([Outcome.PASSED, Outcome.PASSED], Outcome.PASSED),
        ([Outcome.PASSED, Outcome.NOT_RUN], Outcome.PASSED),
        ([Outcome.PASSED, Outcome.FAILED], Outcome.FAILED),
        ([Outcome.FAILED, Outcome.TIMEOUT], Outcome.TIMEOUT),
        ([Outcome.TIMEOUT, Outcome.ERROR], Outcome.ERROR),
        ([Outcome.PASSED, Outcome.CANCELLED], Outcome.CANCELLED),
        ([Outcome.PASSED, Outcome.UNAVAILABLE], Outcome.PASSED),  # e.g. no install suite without zlib
        ([Outcome.UNAVAILABLE, Outcome.NOT_RUN], Outcome.UNAVAILABLE),
        ([Outcome.FAILED, Outcome.UNAVAILABLE], Outcome.FAILED),
        ([Outcome.NOT_RUN], Outcome.ERROR),
        ([], Outcome.ERROR),
    ],
)
def test_cell_outcome_shows_the_most_urgent(outcomes: list[Outcome], expected: Outcome) -> None:
    assert cell_outcome([suite(o) for o in outcomes]) is expected


@pytest.mark.parametrize(
    ("code", "failed", "errors", "tests", "expected"),
    [
        (0, 0, 0, 31, Outcome.PASSED),
        (1, 2, 0, 31, Outcome.FAILED),
        (1, 0, 1, 31, Outcome.FAILED),  # an error in a fixture is still a verdict on a test
        (5, 0, 0, 0, Outcome.ERROR),  # no tests collected is no verdict
        (0, 0, 0, 0, Outcome.ERROR),
        (2, 0, 0, 3, Outcome.ERROR),  # interrupted
        (4, 0, 0, 0, Outcome.ERROR),  # usage error, e.g. the suite directory is missing
        (1, 0, 0, 5, Outcome.ERROR),  # exit 1 without a failing test: something else broke
    ],
)
def test_pytest_outcome(code: int, failed: int, errors: int, tests: int, expected: Outcome) -> None:
    assert pytest_outcome(code, failed, errors, tests) is expected


def cell(outcome: Outcome, name: str = "c") -> CellResult:
    return CellResult(cell=name, outcome=outcome)


@pytest.mark.parametrize(
    ("outcomes", "strict", "expected"),
    [
        ([Outcome.PASSED, Outcome.UNAVAILABLE], False, 0),
        ([Outcome.PASSED, Outcome.UNAVAILABLE], True, 1),
        ([Outcome.PASSED, Outcome.FAILED], False, 1),
        ([Outcome.PASSED, Outcome.ERROR], False, 1),
        ([Outcome.PASSED, Outcome.TIMEOUT], False, 1),
        ([Outcome.PASSED, Outcome.CANCELLED], False, 1),
        ([Outcome.UNAVAILABLE, Outcome.UNAVAILABLE], False, 3),
        ([Outcome.UNAVAILABLE], True, 3),
        ([], False, 3),
    ],
)
def test_exit_codes(outcomes: list[Outcome], strict: bool, expected: int) -> None:
    assert exit_code([cell(o, f"c{i}") for i, o in enumerate(outcomes)], strict=strict) == expected


def test_fail_fast_stops_on_bad_outcomes_only() -> None:
    assert should_stop(cell(Outcome.FAILED), fail_fast=True)
    assert should_stop(cell(Outcome.TIMEOUT), fail_fast=True)
    assert not should_stop(cell(Outcome.UNAVAILABLE), fail_fast=True)
    assert not should_stop(cell(Outcome.FAILED), fail_fast=False)


def attempt(**fields: object) -> Attempt:
    values: dict[str, object] = {"returncode": 0, "output": "log line", "junit": "", "duration": 3.0, "timeout": 600.0}
    return Attempt(**{**values, **fields})  # type: ignore[arg-type]


def test_the_harness_deadline_is_a_timeout() -> None:
    result = judge(Suite.UNIT, attempt(returncode=-9, timed_out=True))
    assert (result.outcome, result.message) == (Outcome.TIMEOUT, "did not finish within 600s; the harness stopped it")


def test_a_kill_from_elsewhere_is_not_a_timeout() -> None:
    # subprocess reports SIGKILL as -9, which the old harness also used for its own deadline.
    result = judge(Suite.UNIT, attempt(returncode=-9, killed_by=9, duration=15.0))
    assert result.outcome is Outcome.ERROR
    assert result.message.startswith("killed by signal 9 (SIGKILL)")
    assert "log line" in result.log_tail


def test_out_of_memory_says_so() -> None:
    result = judge(Suite.UNIT, attempt(returncode=137, killed_by=9, out_of_memory=True, memory_limit="4g"))
    assert result.outcome is Outcome.ERROR and result.message.startswith("killed: out of memory (limit 4g)")


def test_junit_decides_a_finished_run() -> None:
    result = judge(Suite.UNIT, attempt(returncode=1, junit=JUNIT_ONE_FAILURE))
    assert (result.outcome, result.tests, result.failed, result.skipped) == (Outcome.FAILED, 3, 1, 1)
    no_junit = judge(Suite.UNIT, attempt(returncode=2))
    assert no_junit.outcome is Outcome.ERROR and "wrote no JUnit XML" in no_junit.message
    broken = judge(Suite.UNIT, attempt(returncode=1, junit="<testsuite"))
    assert broken.outcome is Outcome.ERROR and "unreadable" in broken.message


def test_an_interrupt_cancels_what_it_cut_short_and_keeps_verdicts() -> None:
    killed = judge(Suite.HTTP, attempt(returncode=-9, killed_by=9))
    assert cancelled_if_interrupted(killed, interrupted=True).outcome is Outcome.CANCELLED
    assert cancelled_if_interrupted(killed, interrupted=False).outcome is Outcome.ERROR
    passed = SuiteResult(suite=Suite.UNIT, outcome=Outcome.PASSED, tests=3, passed=3)
    assert cancelled_if_interrupted(passed, interrupted=True) is passed


def test_an_interrupted_run_exits_130_whatever_finished() -> None:
    assert exit_code([cell(Outcome.PASSED)], interrupted=True) == 130


def test_the_engine_tells_its_own_deadline_from_a_kill() -> None:
    from matrix.engine import Engine

    engine = Engine()
    deadline = engine.command(["sh", "-c", "echo started; sleep 5"], timeout=0.5)
    assert (deadline.timed_out, deadline.returncode, deadline.output) == (True, -9, "started\n")
    killed = engine.command(["sh", "-c", "kill -9 $$"], timeout=30)
    assert (killed.timed_out, killed.signal) == (False, 9)
    done = engine.command(["sh", "-c", "exit 3"], timeout=30)
    assert (done.timed_out, done.returncode, done.signal) == (False, 3, 0)
