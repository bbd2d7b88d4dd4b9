"""The outcome rules: a pytest run to a suite outcome, suites to a cell's, cells to the exit code. Pure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from matrix.budgets import CPYTHON, DEFAULT, PYPY, Budget, budget_for, kind
from matrix.model import CellResult, Flavour, Implementation, Outcome, Suite, SuiteResult, TestFailure, Usage
from matrix.outcomes import (
    RETRIED,
    Attempt,
    after_attempts,
    cancelled_if_interrupted,
    cell_outcome,
    counts,
    exit_code,
    judge,
    pytest_outcome,
    should_stop,
    within_budget,
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


def test_a_host_process_tells_the_harness_deadline_from_a_kill() -> None:
    from matrix.processes import Processes

    engine = Processes()
    deadline = engine.command(["sh", "-c", "echo started; sleep 5"], timeout=0.5)
    assert (deadline.timed_out, deadline.returncode, deadline.output) == (True, -9, "started\n")
    killed = engine.command(["sh", "-c", "kill -9 $$"], timeout=30)
    assert (killed.timed_out, killed.signal) == (False, 9)
    done = engine.command(["sh", "-c", "exit 3"], timeout=30)
    assert (done.timed_out, done.returncode, done.signal) == (False, 3, 0)


# --- budgets and reruns -------------------------------------------------------------------------------


def measured(outcome: Outcome, peak: int, cpu: float = 1.0, name: Suite = Suite.PAYLOAD) -> SuiteResult:
    usage = Usage(peak_memory=peak, cpu_time=cpu, measured_by="the container's cgroup")
    return SuiteResult(suite=name, outcome=outcome, tests=38, passed=38, usage=usage)


def test_a_suite_over_its_memory_budget_fails_and_says_which_budget() -> None:
    budget = budget_for(Suite.PAYLOAD, CPYTHON)
    over = within_budget(measured(Outcome.PASSED, budget.memory + 1), budget)
    assert over.outcome is Outcome.FAILED
    assert f"over the payload suite's CPython budget of {budget.memory_text}" in over.message
    assert over.over_budget and "matrix/budgets.py" in over.message
    assert budget.memory_text == "60 x 5 MB (300 MB)"
    within = measured(Outcome.PASSED, budget.memory)
    assert within_budget(within, budget) is within
    unmeasured = SuiteResult(suite=Suite.PAYLOAD, outcome=Outcome.PASSED, tests=1, passed=1)
    assert within_budget(unmeasured, budget) is unmeasured


def contained(fraction: float, limit: int = 4 * 2**30) -> SuiteResult:
    """A passed suite whose container, limited to `limit`, peaked at `fraction` of it."""
    usage = Usage(peak_memory=int(fraction * limit), cpu_time=1.0, measured_by="the container's cgroup", limit=limit)
    return replace(measured(Outcome.PASSED, 0), usage=usage)


def test_a_peak_within_a_tenth_of_the_container_limit_warns_even_when_the_suite_passes() -> None:
    roomy = Budget(memory=10**12, cpu=10**6)
    warned = within_budget(contained(0.91), roomy)
    assert warned.outcome is Outcome.PASSED
    assert warned.near_limit == "peak memory 3,908 MB is within 10% of its container's limit of 4,295 MB"
    assert within_budget(contained(0.89), roomy).near_limit == ""
    assert within_budget(measured(Outcome.PASSED, 10**12 - 1), roomy).near_limit == ""  # a host suite: no limit


def test_an_over_budget_message_says_what_the_budget_assumed_of_the_interpreter() -> None:
    over = within_budget(contained(0.91), budget_for(Suite.PAYLOAD, PYPY))
    assert over.outcome is Outcome.FAILED and over.near_limit
    assert "which assumes pytest's nursery 4MB (PYPY_GC_NURSERY); servers bound their own to 4MB" in over.message


def test_each_kind_of_interpreter_has_the_payload_budget_stated_in_5_mb() -> None:
    for implementation, flavour, multiple in ((Implementation.CPYTHON, Flavour.DEFAULT, 60),
                                              (Implementation.CPYTHON, Flavour.FREE_THREADED, 100),
                                              (Implementation.PYPY, Flavour.DEFAULT, 200)):  # fmt: skip
        budget = budget_for(Suite.PAYLOAD, kind(implementation, flavour))
        assert budget.memory == multiple * 5_000_000 and budget.memory_text.startswith(f"{multiple} x 5 MB")
    assert budget_for(Suite.UNIT, PYPY) == budget_for(Suite.HOSTILE) == DEFAULT


def test_a_cpu_budget_and_a_failure_that_was_also_over_budget() -> None:
    tight = Budget(memory=10**12, cpu=5.0)
    over = within_budget(measured(Outcome.PASSED, 1, cpu=6.0), tight)
    assert over.outcome is Outcome.FAILED and "CPU time 6s is over the payload suite's budget of 5s" in over.message
    failed = replace(measured(Outcome.FAILED, 1, cpu=6.0), message="1 failed")
    kept = within_budget(failed, tight)
    assert kept.outcome is Outcome.FAILED and kept.message.startswith("1 failed; CPU time 6s")
    assert within_budget(measured(Outcome.ERROR, 1, cpu=6.0), tight).outcome is Outcome.ERROR


FAILURE = TestFailure(test_id="tests/http/test_x.py::test_quick", message="median 0.180 s")


def test_a_suite_that_fails_then_passes_is_flaky_with_the_first_failure_kept() -> None:
    first = replace(suite(Outcome.FAILED), failures=(FAILURE,), duration=3.0, message="")
    second = replace(suite(Outcome.PASSED), duration=2.0, tests=4, passed=4)
    flaky = after_attempts([first, second])
    assert flaky.outcome is Outcome.FLAKY
    assert [e.failures for e in flaky.earlier] == [(FAILURE,)] and flaky.duration == 5.0
    assert flaky.counts == "4 passed (run 1: 1 failed)"
    twice = after_attempts([first, first])
    assert twice.outcome is Outcome.FAILED and len(twice.earlier) == 1
    assert after_attempts([second]) is second


@pytest.mark.parametrize(("strict", "expected"), [(False, 0), (True, 1)])
def test_flaky_counts_apart_and_fails_the_run_only_with_strict(strict: bool, expected: int) -> None:
    cells = [cell(Outcome.PASSED, "a"), cell(Outcome.FLAKY, "b")]
    assert exit_code(cells, strict=strict) == expected
    assert counts(cells)["flaky"] == 1 and counts(cells)["passed"] == 1
    assert cell_outcome([suite(Outcome.PASSED), suite(Outcome.FLAKY)]) is Outcome.FLAKY
    assert cell_outcome([suite(Outcome.FAILED), suite(Outcome.FLAKY)]) is Outcome.FAILED
    assert not should_stop(cell(Outcome.FLAKY), fail_fast=True)
    assert Outcome.FLAKY not in RETRIED and Outcome.FAILED in RETRIED


def test_a_host_process_is_measured_by_what_it_and_its_children_used() -> None:
    import sys

    from matrix.processes import HOST_USAGE, Processes

    grandchild = "data = b'x' * 80_000_000"  # written, so every page is resident
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    done = Processes().command([sys.executable, "-c", child], timeout=60)
    assert done.ok and done.usage.measured_by == HOST_USAGE
    assert done.usage.peak_memory >= 80_000_000 and done.usage.cpu_time > 0  # the grandchild's, waited for
