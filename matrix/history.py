"""Flake history: the outcome of every suite that ran, run after run, in RESULTS/history.jsonl (one line a run,
appended, the newest HISTORY_RUNS kept), and each suite's flake rate over its last FLAKE_WINDOW runs. A suite
that passed this time but came out flaky (failed, then passed when run again) in FLAKE_NAMED of its last runs is
named in every summary: one flaky run is noise, two in ten is a test or a server to look at.

Only suites that ran count: a remembered pass (cached), a suite not selected, cancelled or unavailable says
nothing about flakiness. The rates are pure (entries in, rates out); `append` and `read` are the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import CellResult, Outcome

HISTORY_FILE = "history.jsonl"
HISTORY_RUNS = 200  # lines kept: enough for every suite's FLAKE_WINDOW across subset runs
FLAKE_WINDOW = 10
FLAKE_NAMED = 2
_SAYS_NOTHING = frozenset({Outcome.NOT_RUN, Outcome.CANCELLED, Outcome.UNAVAILABLE})


@dataclass(frozen=True, kw_only=True)
class FlakeRate:
    cell: str
    suite: str
    flaky: int  # how many of its last `runs` came out flaky
    runs: int  # its last runs, at most FLAKE_WINDOW

    @property
    def named(self) -> bool:
        return self.flaky >= FLAKE_NAMED

    @property
    def text(self) -> str:
        return f"{self.cell} {self.suite}: flaky in {self.flaky} of its last {self.runs} runs"


def entry(results: Sequence[CellResult], *, run_id: str, date: str, commit: str) -> dict[str, object]:
    """This run's line: every suite that ran, by "cell/suite", and what it came out."""
    ran = {f"{r.cell}/{s.suite.value}": s.outcome.value for r in results for s in r.suites
           if s.outcome not in _SAYS_NOTHING and not s.cached}  # fmt: skip
    return {"run": run_id, "date": date, "commit": commit, "outcomes": ran}


def rates(entries: Sequence[dict[str, object]]) -> tuple[FlakeRate, ...]:
    """Each suite's flakes over its own last FLAKE_WINDOW runs (oldest entry first), those that flaked at all, most
    flaky first."""
    seen: dict[str, list[str]] = {}
    for line in entries:
        outcomes = line.get("outcomes")
        for key, outcome in (outcomes.items() if isinstance(outcomes, dict) else ()):
            seen.setdefault(str(key), []).append(str(outcome))
    found = []
    for key, outcomes in seen.items():
        last = outcomes[-FLAKE_WINDOW:]
        flaky = last.count(Outcome.FLAKY.value)
        if flaky:
            cell, _, suite = key.rpartition("/")
            found.append(FlakeRate(cell=cell, suite=suite, flaky=flaky, runs=len(last)))
    return tuple(sorted(found, key=lambda r: (-r.flaky, r.cell, r.suite)))


def read(results: Path) -> list[dict[str, object]]:
    """RESULTS/history.jsonl's entries, oldest first; a line that is not JSON (a run killed mid-write) is left out."""
    try:
        lines = (results / HISTORY_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            entries.append(data)
    return entries


def append(results: Path, line: dict[str, object]) -> list[dict[str, object]]:
    """Add a run's line, keep the newest HISTORY_RUNS (rewritten whole, atomically); returns them."""
    kept = [*read(results), line][-HISTORY_RUNS:]
    results.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{HISTORY_FILE}.", dir=results)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(e, sort_keys=True) + "\n" for e in kept)
    os.chmod(temp, 0o644)
    os.replace(temp, results / HISTORY_FILE)
    return kept
