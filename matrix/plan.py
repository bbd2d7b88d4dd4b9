"""The plan as pure data: which cells and suites, which shard, in which order, and how shards join again.

Nothing here touches an engine, a file or the clock, so every rule is a unit test (tests/lab/test_plan.py).
The outcome rules are in outcomes.py.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import arches
from .errors import UsageError
from .model import SUITES, Cell, CellResult, Environment, Implementation, Outcome, Suite
from .text import first

RERUN = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT, Outcome.FLAKY, Outcome.CANCELLED})


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What the command line asked for. Empty tuples mean "all"."""

    distros: tuple[str, ...] = ()
    pythons: tuple[str, ...] = ()
    implementations: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    arches: tuple[str, ...] = ()  # Debian's names; "all" is every architecture, the opt-in ones too
    suites: tuple[Suite, ...] = SUITES
    only: tuple[tuple[str, tuple[Suite, ...]], ...] = ()  # --rerun-failed: these cells, and in each these suites
    asked: bool = False  # --suite named them: an emulated cell then runs them all too (budgets.UNDER_EMULATION)

    @property
    def subset(self) -> str:
        """'' when nothing narrows the run (every cell that is not opt-in, or more with --arch all; every suite),
        else the options that do, as given."""
        picked = [(option, values) for option, values in (
            ("--distro", self.distros), ("--python", self.pythons), ("--implementation", self.implementations),
            ("--cell", self.cells), ("--arch", tuple(a for a in self.arches if a != "all"))) if values]  # fmt: skip
        parts = [f"{option} {','.join(values)}" for option, values in picked]
        parts += [f"--suite {','.join(s.value for s in self.suites)}"] if self.suites != SUITES else []
        parts += ["--rerun-failed"] if self.only else []
        return " ".join(parts)

    def suites_for(self, cell: str) -> tuple[Suite, ...]:
        """The suites to run in that cell."""
        if not self.only:
            return self.suites
        wanted = dict(self.only).get(cell, ())
        return tuple(s for s in self.suites if s in wanted)


def rerun_plan(results: Iterable[CellResult]) -> tuple[tuple[str, tuple[Suite, ...]], ...]:
    """What --rerun-failed runs again from a run's records: every suite that did not pass (failed, error,
    timeout, flaky, cancelled), in its cell; a cell that failed before any suite ran (a build), or never
    started, again as a whole. Unavailable cells are not failures."""
    plan = []
    for result in results:
        if result.outcome is Outcome.UNAVAILABLE:
            continue
        again = tuple(s.suite for s in result.suites if s.outcome in RERUN)
        ran = any(s.outcome is not Outcome.NOT_RUN for s in result.suites)
        if not again and result.outcome in RERUN and not ran:
            again = SUITES
        if again:
            plan.append((result.cell, again))
    return tuple(plan)


@dataclass(frozen=True, kw_only=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def split_values(raw: Iterable[str]) -> tuple[str, ...]:
    """Accept both repeated options and comma lists: ("a,b", "c") -> ("a", "b", "c")."""
    return tuple(v.strip() for item in raw for v in item.split(",") if v.strip())


def parse_suites(raw: Iterable[str]) -> tuple[Suite, ...]:
    values = split_values(raw)
    if not values or values == ("all",):
        return SUITES
    known = [s.value for s in SUITES]
    unknown = [v for v in values if v not in known]
    if unknown:
        raise UsageError(f"unknown suite {', '.join(unknown)}; the suites are {', '.join(known)}.")
    # Report columns keep one order whatever order they were asked in.
    return tuple(s for s in SUITES if s.value in values)


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
    """3.11 (every 3.11, PyPy's too), py3.11, python3.11, 3.14t or pypy3.11 (only that interpreter); globs."""
    bare = pattern.removeprefix("python").removeprefix("py")
    return any(fnmatch.fnmatchcase(value, wanted) for value, wanted in (
        (cell.python, bare), (cell.slug, pattern), (cell.slug.removeprefix("py"), bare)))  # fmt: skip


def select(cells: Sequence[Cell], selection: Selection, *, native: str = "") -> tuple[Cell, ...]:
    """Filter the table. Every selector value must match some cell, and together they must match one. A cell that
    is opt-in (an emulated architecture that takes long) is in only when --arch or --cell names it; `native` is
    the machine's own architecture, which cells that name none are built for."""
    native = native or arches.native()

    def arch_matches(pattern: str, cell: Cell) -> bool:
        return pattern == "all" or fnmatch.fnmatchcase(cell.arch or native, pattern)

    checks = (
        ("--distro", selection.distros, lambda p, c: fnmatch.fnmatchcase(c.family.value, p)),
        ("--python", selection.pythons, _python_matches),
        ("--implementation", selection.implementations, lambda p, c: fnmatch.fnmatchcase(c.implementation.value, p)),
        ("--cell", selection.cells, lambda p, c: fnmatch.fnmatchcase(c.name, p)),
        ("--arch", selection.arches, arch_matches),
    )
    for option, patterns, matches in checks:
        for pattern in patterns:
            if not any(matches(pattern, c) for c in cells):
                raise UsageError(f"{option} {pattern} matches no cell. {_what_exists(cells, option)}")
    chosen = tuple(
        c for c in cells if all(not patterns or any(matches(p, c) for p in patterns) for _, patterns, matches in checks)
    )
    chosen = tuple(c for c in chosen if not c.opt_in or _named(c, selection, native))
    # A cell none of whose own suites is selected has nothing to run (--suite http and a payload-only cell)
    running = tuple(c for c in chosen if set(selection.suites_for(c.name)) & set(c.suites))
    if chosen and not running:
        raise UsageError(f"none of the cells selected ({first([c.name for c in chosen], 5)}) runs "
                         f"{', '.join(s.value for s in selection.suites)}. `--list` says which suites each runs.")
    chosen = running
    if not chosen:
        raise UsageError(
            "no cell matches all of the selectors together. Run `scripts/run_matrix.py --list` to see them."
        )
    return chosen


def _named(cell: Cell, selection: Selection, native: str) -> bool:
    """Whether an opt-in cell was asked for by name: its architecture (a glob that is not '*', or 'all'), or the
    cell itself, exactly (a glob such as 'debian-*' does not start a riscv64 cell's hours under emulation)."""
    arch = cell.arch or native
    by_arch = any(p == "all" or (p != "*" and fnmatch.fnmatchcase(arch, p)) for p in selection.arches)
    return by_arch or cell.name in selection.cells


def _what_exists(cells: Sequence[Cell], option: str) -> str:
    if option == "--distro":
        values = sorted({c.family.value for c in cells})
    elif option == "--implementation":
        values = sorted({c.implementation.value for c in cells})
    elif option == "--arch":
        values = ["all", *sorted({c.arch for c in cells if c.arch} | {arches.native()})]
    elif option == "--python":
        values = sorted({c.python for c in cells}, key=lambda v: tuple(int(x) for x in v.split(".")))
    else:
        values = [c.name for c in cells]
    return f"Known {option.removeprefix('--')} values: {', '.join(values)}."


def shard(cells: Sequence[Cell], which: Shard | None, durations: Mapping[str, float] | None = None) -> tuple[Cell, ...]:
    """A deterministic share of the selection, in table order.

    Without durations: round-robin in table order, so shards balance families. With the durations of an
    earlier run: longest first, each cell to the shard with the least work so far, so shards finish close
    together; a cell with no recorded duration counts as the median of those recorded.
    """
    if which is None:
        return tuple(cells)
    if not durations:
        return tuple(c for i, c in enumerate(cells) if i % which.count == which.index - 1)
    known = [durations[c.name] for c in cells if c.name in durations]
    default = statistics.median(known) if known else 1.0
    load = [0.0] * which.count
    mine: set[str] = set()
    for cell in sorted(cells, key=lambda c: -durations.get(c.name, default)):  # stable: table order on ties
        index = min(range(which.count), key=lambda i: (load[i], i))
        load[index] += durations.get(cell.name, default)
        if index == which.index - 1:
            mine.add(cell.name)
    return tuple(c for c in cells if c.name in mine)


def plan_digest(cells: Sequence[Cell], selection: Selection, count: int) -> str:
    """The identity of a sharded plan: the selected cells as the table defines them, the suites and N.
    Every shard of one plan records the same digest, so --merge can tell shards of different plans apart."""
    text = json.dumps([repr(c) for c in cells] + [s.value for s in selection.suites] + [count])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pick_next(waiting: Sequence[Cell], is_ready: Callable[[Cell], bool], *, anything_running: bool,
              durations: Mapping[str, float] | None = None, running: Sequence[Cell] = (), slots: int = 0
              ) -> Cell | None:  # fmt: skip
    """The next cell to start, or None to wait for a slot's work to finish first.

    Ready cells first (their base is there, and a compiled Python built), longest first, since the run ends with
    its longest cell: by how long each took in an earlier run, a cell that run did not have first of all (it may
    well be long), and otherwise cells that compile their Python (minutes of builder stage), then PyPy cells, then
    other container cells, then host cells. While container cells wait for their bases, host cells (ready at once)
    take at most half of the `slots`, or they would hold them all for their whole run. A cell whose base is still
    being made is started only when nothing else runs, so a free slot never idles forever.
    """
    known = durations or {}
    ready = [c for c in waiting if is_ready(c)]
    coming = slots and any(c.family.in_container and not is_ready(c) for c in waiting)
    if coming and sum(not c.family.in_container for c in running) >= max(1, slots // 2):
        ready = [c for c in ready if c.family.in_container]
    ready.sort(key=lambda c: (-known.get(c.name, float("inf")) if known else 0.0, _longest_first(c)))
    if ready:
        return ready[0]
    if waiting and not anything_running:
        return waiting[0]
    return None


def _longest_first(cell: Cell) -> int:
    """Without an earlier run's durations: a compiled Python, then PyPy (its suites take 2 to 3 times as
    long as CPython's), then other containers, then host cells."""
    if cell.compiles_python:
        return 0
    if cell.implementation is Implementation.PYPY:
        return 1
    return 2 if cell.family.in_container else 3


def github_matrix(cells: Sequence[Cell], *, shards: int = 0) -> str:
    """GitHub Actions `strategy.matrix` JSON: one job per cell, or with `shards` one job per --shard K/N."""
    if shards:
        include: list[dict[str, object]] = [{"shard": f"{k}/{shards}"} for k in range(1, shards + 1)]
    else:
        include = [
            {"cell": c.name, "family": c.family.value, "python": c.python, "container": c.family.in_container}
            for c in cells
        ]
    return json.dumps({"include": include}, separators=(",", ":"))


def order_results(results: Iterable[CellResult], cells: Sequence[Cell]) -> tuple[CellResult, ...]:
    """Table order for known cells, then any others (from merged shards of another table) by name."""
    rank = {c.name: i for i, c in enumerate(cells)}
    return tuple(sorted(results, key=lambda r: (rank.get(r.cell, len(rank)), r.cell)))


def check_shards(envs: Sequence[tuple[str, Environment]]) -> None:
    """Refuse to merge results that are not the shards of one plan: every shard K/N present once, one
    commit, one plan (cell table, selection, N). Each entry is (where it was read, its environment)."""
    problems = []
    commits = {f"{env.commit or '?'}{' (dirty)' if env.dirty else ''}" for _, env in envs}
    if len(commits) > 1:
        problems.append(f"they test different commits ({', '.join(sorted(commits))})")
    plans = {env.plan for _, env in envs}
    if len(plans) > 1:
        problems.append("they come from different plans (cell table, selection or shard count differ)")
    shards = [(where, env.shard) for where, env in envs]
    counts = {s.partition("/")[2] for _, s in shards if "/" in s}
    if len(counts) > 1 or any("/" not in s for _, s in shards):
        listed = ", ".join(f"{w}: {s or 'not a shard'}" for w, s in shards)
        problems.append(f"they are not shards of one --shard K/N run ({listed})")
    elif counts:
        count = int(counts.pop())
        seen = [int(s.partition("/")[0]) for _, s in shards]
        missing = sorted(set(range(1, count + 1)) - set(seen))
        twice = sorted({k for k in seen if seen.count(k) > 1})
        if missing:
            listed = ", ".join(f"{k}/{count}" for k in missing)
            problems.append(f"shard{'s' if len(missing) > 1 else ''} {listed} missing")
        if twice:
            problems.append(f"shard {', '.join(f'{k}/{count}' for k in twice)} given more than once")
    if problems:
        raise UsageError("cannot merge: " + "; ".join(problems) + ". Merge the results of every shard of one run.")


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
