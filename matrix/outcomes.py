"""Every outcome rule in one place: a pytest run to a suite outcome, a suite's measured use against its budget,
attempts to one result (flaky when a rerun passed), suites to a cell outcome, cells to the run's exit code.
Pure: values in, values out (tests/lab/test_outcomes.py).

Only PASSED, FLAKY and FAILED are verdicts on the code. A suite that did not finish is told apart by why:
the harness's own deadline (TIMEOUT), a signal from elsewhere (ERROR, "killed by signal N"), the engine's
memory limit (ERROR, "out of memory"), or the run being interrupted (CANCELLED).
"""

from __future__ import annotations

import signal
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .budgets import NEAR_LIMIT, Budget, megabytes
from .exits import Exit
from .junit import parse
from .model import CellResult, EarlierAttempt, Outcome, Suite, SuiteResult, Usage

BAD = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT, Outcome.CANCELLED})
# When suites disagree, the cell shows the most urgent: a broken harness hides verdicts, so it comes first.
# A suite this cell cannot have (the install suite without zlib) leaves the others' pass standing.
_PRECEDENCE = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.FAILED, Outcome.CANCELLED, Outcome.FLAKY)
RETRIED = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT})  # what --retries runs again


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """What one pytest process left behind."""

    returncode: int
    output: str
    junit: str
    duration: float
    timeout: float
    timed_out: bool = False  # the harness stopped it at its deadline
    killed_by: int = 0  # the signal that ended it, when one did
    out_of_memory: bool = False  # the engine says its memory limit killed it
    memory_limit: str = ""
    usage: Usage = field(default_factory=Usage)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _unfinished(suite: Suite, attempt: Attempt, tail_text: str) -> SuiteResult | None:
    """The result of a run that did not finish by itself, or None when it did."""
    if attempt.timed_out:
        outcome, message = Outcome.TIMEOUT, f"did not finish within {attempt.timeout:.0f}s; the harness stopped it"
    elif attempt.out_of_memory:
        outcome = Outcome.ERROR
        message = f"killed: out of memory (limit {attempt.memory_limit}); the log tail shows the test it was in"
    elif attempt.killed_by:
        name = signal_name(attempt.killed_by)
        outcome = Outcome.ERROR
        message = f"killed by signal {attempt.killed_by} ({name}); the log tail shows the test it was in"
    else:
        return None
    return SuiteResult(suite=suite, outcome=outcome, duration=attempt.duration, message=message, log_tail=tail_text,
                       usage=attempt.usage)  # fmt: skip


def judge(suite: Suite, attempt: Attempt) -> SuiteResult:
    """Attempt in, result out."""
    tail_text = "\n".join(attempt.output.rstrip().splitlines()[-40:])
    unfinished = _unfinished(suite, attempt, tail_text)
    if unfinished is not None:
        return unfinished
    try:
        counts = parse(attempt.junit) if attempt.junit else None
        broken = "it wrote no JUnit XML"
    except ET.ParseError as exc:
        counts, broken = None, f"its JUnit XML is unreadable ({exc})"
    if counts is None:
        message = f"pytest exited {attempt.returncode} and {broken}"
        return SuiteResult(suite=suite, outcome=Outcome.ERROR, duration=attempt.duration, message=message,
                           log_tail=tail_text, usage=attempt.usage)  # fmt: skip
    outcome = pytest_outcome(attempt.returncode, counts.failed, counts.errors, counts.tests)
    message = ""
    if outcome is Outcome.ERROR:
        message = "no tests were collected" if counts.tests == 0 else f"pytest exited {attempt.returncode}"
    return SuiteResult(
        suite=suite, outcome=outcome, tests=counts.tests, passed=counts.passed, failed=counts.failed,
        errors=counts.errors, skipped=counts.skipped, duration=attempt.duration, failures=counts.failures,
        skips=counts.skips, repetitions=counts.repetitions, message=message,
        log_tail=tail_text if outcome is not Outcome.PASSED else "", junit_xml=attempt.junit, usage=attempt.usage,
    )  # fmt: skip


def within_budget(result: SuiteResult, budget: Budget) -> SuiteResult:
    """A suite that used more than its budget (budgets.py) fails, saying which budget and by how much; a
    result that did not pass anyway keeps its outcome and gains the note. Unmeasured use is never over."""
    usage, over = result.usage, []
    if usage.limit and usage.peak_memory >= (1 - NEAR_LIMIT) * usage.limit:
        result = replace(result, near_limit=f"peak memory {megabytes(usage.peak_memory)} is within "
                                            f"{NEAR_LIMIT:.0%} of its container's limit of {megabytes(usage.limit)}")
    whose = f"{result.suite.value} suite's" + (f" {budget.scope}" if budget.scope else "")
    if usage.peak_memory > budget.memory:
        over.append(f"peak memory {megabytes(usage.peak_memory)} is over the {whose} budget of {budget.memory_text}")
    if usage.cpu_time > budget.cpu:
        over.append(f"CPU time {usage.cpu_time:.0f}s is over the {whose} budget of {budget.cpu:.0f}s")
    if not over:
        return result
    assumed = f", which assumes {budget.assumes}" if budget.assumes else ""
    said = "; ".join(over) + f" ({usage.measured_by}{assumed}; budgets in matrix/budgets.py)"
    message = f"{result.message}; {said}" if result.message else said
    outcome = Outcome.FAILED if result.outcome in (Outcome.PASSED, Outcome.FLAKY) else result.outcome
    return replace(result, outcome=outcome, message=message, over_budget=said)


def after_attempts(attempts: Sequence[SuiteResult]) -> SuiteResult:
    """The attempts of one suite (the first, then each rerun of one that did not pass) as one result: the last
    attempt's, with the earlier ones kept; one that passed after failing is flaky, never a pass."""
    *earlier, last = attempts
    if not earlier:
        return last
    kept = tuple(EarlierAttempt(outcome=a.outcome, failures=a.failures, message=a.message, duration=a.duration,
                                log_tail=a.log_tail, usage=a.usage) for a in earlier)  # fmt: skip
    outcome = Outcome.FLAKY if last.outcome is Outcome.PASSED else last.outcome
    return replace(last, outcome=outcome, earlier=kept, duration=sum(a.duration for a in attempts))


def pytest_outcome(exit_code: int, failed: int, errors: int, tests: int) -> Outcome:
    """pytest's exit code plus its JUnit counts -> a suite outcome.

    0 all passed; 1 some tests failed (a verdict); 5 no tests collected, 2/3/4 interrupted, internal or
    usage error: the suite did not give a verdict, so it is an error.
    """
    if exit_code == 0 and tests > 0:
        return Outcome.PASSED
    if exit_code == 1 and (failed or errors):
        return Outcome.FAILED
    return Outcome.ERROR


def cancelled_if_interrupted(result: SuiteResult, *, interrupted: bool) -> SuiteResult:
    """A suite whose run the interrupt cut short is cancelled, not an error or a timeout: its process
    was killed by the harness. A verdict reached before the interrupt stands."""
    if interrupted and result.outcome not in (Outcome.PASSED, Outcome.FLAKY, Outcome.FAILED):
        return replace(result, outcome=Outcome.CANCELLED, message="cancelled: the run was interrupted while it ran")
    return result


def cell_outcome(suites: Sequence[SuiteResult]) -> Outcome:
    outcomes = {s.outcome for s in suites}
    for outcome in _PRECEDENCE:
        if outcome in outcomes:
            return outcome
    if Outcome.PASSED in outcomes:
        return Outcome.PASSED
    if Outcome.UNAVAILABLE in outcomes:
        return Outcome.UNAVAILABLE
    # Nothing ran and nothing said why: that is the harness's fault, not a pass.
    return Outcome.ERROR


def exit_code(results: Sequence[CellResult], *, strict: bool = False, interrupted: bool = False,
              ran_nowhere: int = 0) -> Exit:  # fmt: skip
    """The run's exit code (exits.py says what each means). `ran_nowhere`: how many tests a whole run's cells all
    skipped (skips.ran_nowhere; 0 for a run of some cells, which does not judge that)."""
    if interrupted:
        return Exit.INTERRUPTED
    ran = [r for r in results if r.outcome is not Outcome.UNAVAILABLE]
    if not ran:
        return Exit.NOTHING_RAN
    if any(r.outcome in BAD for r in ran) or ran_nowhere:
        return Exit.FAILED
    if strict and (len(ran) != len(results) or any(r.outcome is Outcome.FLAKY for r in ran)):
        return Exit.FAILED
    return Exit.PASSED


def counts(results: Sequence[CellResult]) -> dict[str, int]:
    tally = {o.value: 0 for o in Outcome if o is not Outcome.NOT_RUN}
    for r in results:
        tally[r.outcome.value] = tally.get(r.outcome.value, 0) + 1
    return tally


def should_stop(result: CellResult, *, fail_fast: bool) -> bool:
    return fail_fast and result.outcome in BAD - {Outcome.CANCELLED}
