"""A run against the last full run (RESULTS/latest-full): what newly fails, newly passes, is newly flaky, and
which cells got markedly slower. Pure: records in, a comparison out; report.py renders it.

Suites are compared one by one, so a subset run (--rerun-failed, --cell) says what changed for what it ran.
Slower compares the time of the suites that ran to a verdict both times (a remembered pass keeps the time of
the run that produced it, so a rerun with nothing changed is never "faster" or "slower").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import CellResult, Environment, Outcome

BAD = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT})
TIMED = frozenset({Outcome.PASSED, Outcome.FLAKY, Outcome.FAILED})
SLOWER_RATIO = 1.5  # "markedly": half as long again ...
SLOWER_BY = 30.0  # ... and at least this many seconds more, so a short cell's jitter is not news


@dataclass(frozen=True, kw_only=True)
class Change:
    cell: str
    suite: str  # '' for the cell as a whole (a build that now fails has no suites)
    before: str
    after: str
    note: str = ""

    @property
    def text(self) -> str:
        where = f"{self.cell} {self.suite}" if self.suite else self.cell
        return f"{where}: {self.before} -> {self.after}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True, kw_only=True)
class SinceLastFull:
    run_id: str
    commit: str
    failing: tuple[Change, ...] = ()
    passing: tuple[Change, ...] = ()
    flaky: tuple[Change, ...] = ()
    slower: tuple[Change, ...] = ()

    def lines(self) -> list[str]:
        """The section, one fact a line; 'nothing changed' when nothing did."""
        groups = (("newly failing", self.failing), ("newly passing", self.passing), ("newly flaky", self.flaky),
                  ("markedly slower", self.slower))  # fmt: skip
        out = [f"{title}: {change.text}" for title, changes in groups for change in changes]
        return out or ["nothing newly fails, passes or is flaky, and no cell got markedly slower"]

    @property
    def heading(self) -> str:
        return f"Since the last full run ({self.run_id or 'run id unknown'}, commit {self.commit[:12] or '?'})"


def _pairs(current: Sequence[CellResult], previous: Sequence[CellResult]
           ) -> list[tuple[CellResult, CellResult]]:  # fmt: skip
    before = {r.cell: r for r in previous}
    return [(now, before[now.cell]) for now in current if now.cell in before]


def _suite_changes(now: CellResult, then: CellResult) -> list[tuple[str, Change]]:
    found = []
    for suite in now.suites:
        old = then.suite(suite.suite)
        if old is None or suite.outcome in (Outcome.NOT_RUN, Outcome.CANCELLED):
            continue
        change = Change(cell=now.cell, suite=suite.suite.value, before=old.outcome.value, after=suite.outcome.value,
                        note=suite.message.split(";")[0] if suite.outcome in BAD else "")  # fmt: skip
        kind = _kind(old.outcome, suite.outcome)
        if kind:
            found.append((kind, change))
    if not now.suites and now.outcome in BAD and then.outcome not in BAD:
        found.append(("failing", Change(cell=now.cell, suite="", before=then.outcome.value, after=now.outcome.value,
                                        note=now.message.split(";")[0])))  # fmt: skip
    return found


def _kind(before: Outcome, after: Outcome) -> str:
    if after in BAD and before in (Outcome.PASSED, Outcome.FLAKY):
        return "failing"
    if after is Outcome.PASSED and (before in BAD or before is Outcome.FLAKY):
        return "passing"
    if after is Outcome.FLAKY and before is not Outcome.FLAKY:
        return "flaky"
    return ""


def _timed(result: CellResult, names: set[str]) -> float:
    return sum(s.duration for s in result.suites if s.suite.value in names)


def _slower(now: CellResult, then: CellResult) -> Change | None:
    both = {s.suite.value for s in now.suites if s.outcome in TIMED} & {
        s.suite.value for s in then.suites if s.outcome in TIMED}  # fmt: skip
    took, used_to = _timed(now, both), _timed(then, both)
    if used_to and took >= SLOWER_RATIO * used_to and took - used_to >= SLOWER_BY:
        return Change(cell=now.cell, suite="", before=f"{used_to:.0f}s", after=f"{took:.0f}s",
                      note=f"{took / used_to:.1f}x, the suites that ran both times: {', '.join(sorted(both))}")
    return None


def since_last_full(current: Sequence[CellResult], previous: Sequence[CellResult], env: Environment) -> SinceLastFull:
    kinds: dict[str, list[Change]] = {"failing": [], "passing": [], "flaky": [], "slower": []}
    for now, then in _pairs(current, previous):
        for kind, change in _suite_changes(now, then):
            kinds[kind].append(change)
        slower = _slower(now, then)
        if slower is not None:
            kinds["slower"].append(slower)
    return SinceLastFull(run_id=env.run_id, commit=env.commit, **{k: tuple(v) for k, v in kinds.items()})
