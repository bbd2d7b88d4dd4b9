"""Passed suites are remembered by a hash of everything that decides their result, like a build cache.

A rerun with nothing changed then reports the earlier pass, marked "cached", instead of running the same
tests in the same image again; any change in the code, the suites, the image, the interpreter or the
pytest folder changes the key and the suite runs. Only passes are remembered: a failure, error or
timeout always runs again. `--no-cache` runs everything regardless.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from .model import Outcome, SuiteResult
from .report import suite_from_dict, suite_to_dict, write_atomic

MEMO_VERSION = "1"  # bump when what a suite run means changes (arguments, limits, judge rules)


def memo_key(*parts: str) -> str:
    h = hashlib.sha256(MEMO_VERSION.encode())
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def files_digest(paths: list[Path]) -> str:
    """Content hash of files (and of every file under directories), with their relative names."""
    h = hashlib.sha256()
    for top in paths:
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top] if top.is_file() else []
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            h.update(f"{path.relative_to(top.parent)}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


class SuiteMemo:
    def __init__(self, directory: Path, *, enabled: bool = True) -> None:
        self.directory = directory
        self.enabled = enabled

    def get(self, key: str) -> SuiteResult | None:
        if not self.enabled:
            return None
        path = self.directory / f"{key}.json"
        try:
            result = suite_from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return replace(result, cached=True) if result.outcome is Outcome.PASSED else None

    def put(self, key: str, result: SuiteResult) -> None:
        if result.outcome is Outcome.PASSED and not result.cached:
            write_atomic(self.directory / f"{key}.json", json.dumps(suite_to_dict(result)).encode())
