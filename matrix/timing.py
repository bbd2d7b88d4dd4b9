"""Where a run's time went, from its records: each cell's phases (model.Phase, as cell.Timeline took them) summed by
phase across cells, when each cell got a job slot, and the bases the run made. Pure: records in, rows out; the
reports render them (docs/reports/performance.md#lab-run-times quotes them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import CellResult, Environment


@dataclass(frozen=True, kw_only=True)
class PhaseTotal:
    """One phase summed over the cells that had it: how many, how long in all, and the longest one."""

    name: str
    cells: int
    seconds: float
    longest: str  # the cell whose phase was longest
    longest_seconds: float


def phase_totals(results: Sequence[CellResult]) -> list[PhaseTotal]:
    """Every phase any cell went through, the costliest first. Cells run side by side, so these add up to more
    than the run's wall time: they say where the work went, the timeline says what overlapped."""
    found: dict[str, list[tuple[float, str]]] = {}
    for result in results:
        for phase in result.phases:
            found.setdefault(phase.name, []).append((phase.seconds, result.cell))
    totals = []
    for name, spent in found.items():
        seconds, cell = max(spent)
        totals.append(PhaseTotal(name=name, cells=len(spent), seconds=sum(s for s, _ in spent), longest=cell,
                                 longest_seconds=seconds))  # fmt: skip
    return sorted(totals, key=lambda t: -t.seconds)


def _group(name: str) -> str:
    """A phase's column in the per-cell rows: every build stage is "build", every suite "suites"."""
    return name.split(" ")[0].replace("suite", "suites")


COLUMNS = ("started", "base", "build", "pytest", "suites", "other", "total")


def cell_rows(results: Sequence[CellResult]) -> list[list[str]]:
    """Per cell that ran: when it got its slot, then its phases by group, in seconds."""
    rows = []
    for result in results:
        if not result.phases:
            continue
        groups = {"base": 0.0, "build": 0.0, "pytest": 0.0, "suites": 0.0, "other": 0.0}
        for phase in result.phases:
            groups[_group(phase.name) if _group(phase.name) in groups else "other"] += phase.seconds
        rows.append([result.cell, f"{result.started:.0f}", *(f"{v:.0f}" for v in groups.values()),
                     f"{result.duration:.0f}"])  # fmt: skip
    return rows


def summary(results: Sequence[CellResult], env: Environment) -> str:
    """One line: the wall time, what the cells' phases add up to, the first answers and the bases made."""
    work = sum(p.seconds for r in results for p in r.phases)
    made = sum(b.seconds for b in env.bases)
    return (f"{env.duration:.0f} s wall: {work:.0f} s of cell phases side by side (the bases made in {made:.0f} s "
            f"of them, in the background), then {env.measuring:.0f} s measuring first answers")


def base_lines(env: Environment) -> list[str]:
    """Each base the run made or fetched: how, how long, and its tarball's digest where it has one."""
    return [f"{b.image}: {b.how}, {b.seconds:.0f} s" + (f", tarball sha256 {b.sha256}" if b.sha256 else "")
            for b in env.bases]  # fmt: skip


def digest_lines(results: Sequence[CellResult]) -> list[str]:
    """Each base the cells were built FROM, once, with the sha256 of the tarball the lab made it from: the same
    inputs make the same tarball again (bootstrap.py), so a base is checked by its digest."""
    found: dict[str, str] = {}
    for result in results:
        if result.base_image:
            found.setdefault(result.base_image, result.base_sha256)
    return [f"{image}: " + (f"sha256 {sha} (its tarball)" if sha else "not made by the lab")
            for image, sha in found.items()]  # fmt: skip
