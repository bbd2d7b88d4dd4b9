"""The records' codec: results.json (versioned, mergeable), the records of passed suites (memo.py), and the atomic
write every file of a run goes through. Records in, JSON out and back, losslessly (tests/lab/test_report.py)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .errors import LabInputError
from .model import (
    SUITES,
    BaseMade,
    CellResult,
    EarlierAttempt,
    Environment,
    FirstAnswer,
    Outcome,
    Phase,
    Skip,
    Suite,
    SuiteResult,
    TestFailure,
    Usage,
)
from .outcomes import counts

LATEST, LATEST_FULL = "latest", "latest-full"  # RESULTS/<link>: the newest run's folder, the newest full run's

# 4: suites' usage (peak memory, CPU time) and earlier attempts; the flaky outcome. 5: each cell's phases, notes,
# base and its digest, each suite's scope under emulation, the run's duration, bases made and subset.
SCHEMA = "mcplab-results/5"
READABLE = frozenset({"mcplab-results/3", "mcplab-results/4", SCHEMA})  # the older lack only what has defaults

def to_json(results: Sequence[CellResult], env: Environment, *, suites: Sequence[Suite] = SUITES) -> str:
    data = {
        "schema": SCHEMA,
        "environment": asdict(env),
        "suites": [s.value for s in suites],
        "counts": counts(results),
        "cells": [_cell_dict(r) for r in results],
    }
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def _cell_dict(result: CellResult) -> dict[str, Any]:
    data = asdict(result)
    data["outcome"] = result.outcome.value
    data["suites"] = [suite_to_dict(s) for s in result.suites]
    return data


def from_json(
    text: str, *, source: str = "results.json"
) -> tuple[tuple[CellResult, ...], Environment, tuple[Suite, ...]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabInputError(f"{source} is not JSON ({exc}); was the run that wrote it cut short?") from exc
    if data.get("schema") not in READABLE:
        raise LabInputError(f"{source} has schema {data.get('schema')!r}; this lab reads {SCHEMA!r}.")
    results = tuple(_cell_from(c) for c in data["cells"])
    found = data["environment"]
    env = Environment(**{**found, "dirty": tuple(found.get("dirty", ())),
                         "bases": tuple(BaseMade(**b) for b in found.get("bases", ()))})  # fmt: skip
    return results, env, tuple(Suite(s) for s in data.get("suites", SUITES))


def suite_to_dict(suite: SuiteResult) -> dict[str, Any]:
    data = asdict(suite)
    data["suite"] = suite.suite.value
    data["outcome"] = suite.outcome.value
    data["earlier"] = [{**asdict(e), "outcome": e.outcome.value} for e in suite.earlier]
    return data


def suite_from_dict(data: dict[str, Any]) -> SuiteResult:
    failures = tuple(TestFailure(**f) for f in data.get("failures", ()))
    skips = tuple(Skip(**s) for s in data.get("skips", ()))
    earlier = tuple(_earlier_from(e) for e in data.get("earlier", ()))
    return SuiteResult(**{**data, "suite": Suite(data["suite"]), "outcome": Outcome(data["outcome"]),
                          "failures": failures, "skips": skips, "usage": Usage(**data.get("usage", {})),
                          "earlier": earlier, "scope": tuple(data.get("scope", ()))})  # fmt: skip


def _earlier_from(data: dict[str, Any]) -> EarlierAttempt:
    return EarlierAttempt(**{**data, "outcome": Outcome(data["outcome"]), "usage": Usage(**data.get("usage", {})),
                             "failures": tuple(TestFailure(**f) for f in data.get("failures", ()))})  # fmt: skip


def _cell_from(data: dict[str, Any]) -> CellResult:
    suites = tuple(suite_from_dict(s) for s in data.get("suites", ()))
    found = data.get("first_answer")
    first = None
    if found:
        first = FirstAnswer(**{**found, "samples_ms": tuple(found.get("samples_ms", ())),
                               "bare_samples_ms": tuple(found.get("bare_samples_ms", ()))})  # fmt: skip
    phases = tuple(Phase(**p) for p in data.get("phases", ()))
    return CellResult(**{**data, "outcome": Outcome(data["outcome"]), "suites": suites, "first_answer": first,
                         "phases": phases, "notes": tuple(data.get("notes", ()))})  # fmt: skip


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, 0o644)  # reports are for everyone to read (mkstemp makes them 0600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def results_file(directory: Path) -> Path:
    """The results.json a directory holds: its own, else its `latest` run's, else its newest run folder's
    (a CI artifact may drop the link). --merge takes any of them."""
    for candidate in (directory / "results.json", directory / LATEST / "results.json"):
        if candidate.is_file():
            return candidate
    runs = sorted(p for p in directory.glob("*/results.json") if not p.parent.is_symlink())
    if runs:
        return runs[-1]
    raise LabInputError(f"{directory} holds no results.json; --merge takes folders written by run_matrix.py.")


def read_results(directory: Path) -> tuple[tuple[CellResult, ...], Environment, tuple[Suite, ...]]:
    path = results_file(directory)
    return from_json(path.read_text(encoding="utf-8"), source=str(path))
