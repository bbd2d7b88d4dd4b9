"""The plan as pure data: which cells and suites, which shard, and how results become outcomes and exit codes.

Nothing here touches an engine, a file or the clock, so every rule is a unit test (tests/lab/test_plan.py).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .errors import UsageError
from .model import SUITES, Cell, CellResult, Outcome, PythonFrom, SuiteResult


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What the command line asked for. Empty tuples mean "all"."""

    distros: tuple[str, ...] = ()
    pythons: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    suites: tuple[str, ...] = SUITES


@dataclass(frozen=True, kw_only=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def split_values(raw: Iterable[str]) -> tuple[str, ...]:
    """Accept both repeated options and comma lists: ("a,b", "c") -> ("a", "b", "c")."""
    return tuple(v.strip() for item in raw for v in item.split(",") if v.strip())


def parse_suites(raw: Iterable[str]) -> tuple[str, ...]:
    values = split_values(raw)
    if not values:
        return SUITES
    unknown = [v for v in values if v not in SUITES]
    if unknown:
        raise UsageError(f"unknown suite {', '.join(unknown)}; the suites are {', '.join(SUITES)}.")
    # Report columns keep one order whatever order they were asked in.
    return tuple(s for s in SUITES if s in values)


def parse_shard(raw: str) -> Shard:
    index_text, sep, count_text = raw.partition("/")
    if not sep or not index_text.isdigit() or not count_text.isdigit():
        raise UsageError(f"--shard takes K/N with 1 <= K <= N, e.g. 2/4; got {raw!r}.")
    index, count = int(index_text), int(count_text)
    if not 1 <= index <= count:
        raise UsageError(f"--shard {raw}: K must be between 1 and N.")
    return Shard(index=index, count=count)


def parse_jobs(raw: str, cpu_count: int) -> int:
    if raw == "auto":
        return max(1, cpu_count)
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    raise UsageError(f"--jobs takes a positive number or 'auto'; got {raw!r}.")


def _python_matches(pattern: str, cell: Cell) -> bool:
    pattern = pattern.removeprefix("py").removeprefix("python")
    return fnmatch.fnmatchcase(cell.python, pattern)


def select(cells: Sequence[Cell], selection: Selection) -> tuple[Cell, ...]:
    """Filter the table. Every selector value must match some cell, and together they must match one."""
    checks = (
        ("--distro", selection.distros, lambda p, c: fnmatch.fnmatchcase(c.family.value, p)),
        ("--python", selection.pythons, _python_matches),
        ("--cell", selection.cells, lambda p, c: fnmatch.fnmatchcase(c.name, p)),
    )
    for option, patterns, matches in checks:
        for pattern in patterns:
            if not any(matches(pattern, c) for c in cells):
                raise UsageError(f"{option} {pattern} matches no cell. {_what_exists(cells, option)}")
    chosen = tuple(
        c for c in cells if all(not patterns or any(matches(p, c) for p in patterns) for _, patterns, matches in checks)
    )
    if not chosen:
        raise UsageError(
            "no cell matches all of the selectors together. Run `scripts/run_matrix.py --list` to see them."
        )
    return chosen


def _what_exists(cells: Sequence[Cell], option: str) -> str:
    if option == "--distro":
        values = sorted({c.family.value for c in cells})
    elif option == "--python":
        values = sorted({c.python for c in cells}, key=lambda v: tuple(int(x) for x in v.split(".")))
    else:
        values = [c.name for c in cells]
    return f"Known {option.removeprefix('--')} values: {', '.join(values)}."


def shard(cells: Sequence[Cell], which: Shard | None) -> tuple[Cell, ...]:
    """A deterministic share: round-robin over the selection in table order, so shards balance families."""
    if which is None:
        return tuple(cells)
    return tuple(c for i, c in enumerate(cells) if i % which.count == which.index - 1)


# --- outcomes --------------------------------------------------------------------------------------

# When suites disagree, the cell shows the most urgent: a broken harness hides verdicts, so it comes first.
_PRECEDENCE = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.FAILED, Outcome.CANCELLED, Outcome.UNAVAILABLE)


def cell_outcome(suites: Sequence[SuiteResult]) -> Outcome:
    outcomes = {s.outcome for s in suites}
    for outcome in _PRECEDENCE:
        if outcome in outcomes:
            return outcome
    if Outcome.PASSED in outcomes:
        return Outcome.PASSED
    # Nothing ran and nothing said why: that is the harness's fault, not a pass.
    return Outcome.ERROR


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


BAD = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT, Outcome.CANCELLED})


def exit_code(results: Sequence[CellResult], *, strict: bool = False) -> int:
    """0 every cell that could run passed; 1 any failed, errored or timed out (or, with --strict, was
    unavailable); 3 nothing could run at all."""
    ran = [r for r in results if r.outcome is not Outcome.UNAVAILABLE]
    if not ran:
        return 3
    if any(r.outcome in BAD for r in ran):
        return 1
    if strict and len(ran) != len(results):
        return 1
    return 0


def counts(results: Sequence[CellResult]) -> dict[str, int]:
    tally = {o.value: 0 for o in Outcome if o is not Outcome.NOT_RUN}
    for r in results:
        tally[r.outcome.value] = tally.get(r.outcome.value, 0) + 1
    return tally


def should_stop(result: CellResult, *, fail_fast: bool) -> bool:
    return fail_fast and result.outcome in BAD - {Outcome.CANCELLED}


def pick_next(waiting: Sequence[Cell], is_ready: Callable[[Cell], bool], *, anything_running: bool) -> Cell | None:
    """The next cell to start, or None to wait for a slot's work to finish first.

    Ready cells first (their base is there); among them cells that compile their Python (minutes of
    builder stage) before other container cells before host cells, since the run ends with its longest
    cell. A cell whose base is still being made is started only when nothing else runs, so a free slot
    never idles forever.
    """
    ready = [c for c in waiting if is_ready(c)]
    ready.sort(key=_longest_first)
    if ready:
        return ready[0]
    if waiting and not anything_running:
        return waiting[0]
    return None


def _longest_first(cell: Cell) -> int:
    if cell.python_from is PythonFrom.BUILDER:
        return 0
    return 1 if cell.family.in_container else 2


def github_matrix(cells: Sequence[Cell]) -> str:
    """GitHub Actions `strategy.matrix` JSON: one job per cell."""
    include = [
        {"cell": c.name, "family": c.family.value, "python": c.python, "container": c.family.in_container}
        for c in cells
    ]
    return json.dumps({"include": include}, separators=(",", ":"))


def order_results(results: Iterable[CellResult], cells: Sequence[Cell]) -> tuple[CellResult, ...]:
    """Table order for known cells, then any others (from merged shards of another table) by name."""
    rank = {c.name: i for i, c in enumerate(cells)}
    return tuple(sorted(results, key=lambda r: (rank.get(r.cell, len(rank)), r.cell)))


def merge_results(groups: Iterable[Sequence[CellResult]]) -> tuple[CellResult, ...]:
    """Join shards. A cell in two shards is a mistake in the sharding: refuse it."""
    merged: dict[str, CellResult] = {}
    for group in groups:
        for result in group:
            if result.cell in merged:
                raise UsageError(
                    f"cell {result.cell} appears in more than one of the merged results; merge the "
                    "results of disjoint shards (--shard K/N with the same N and selection)."
                )
            merged[result.cell] = result
    return tuple(merged.values())
