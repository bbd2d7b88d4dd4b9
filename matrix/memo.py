"""Passed suites are remembered by a hash of everything that decides their result, like a build cache.

A rerun with nothing changed then reports the earlier pass, marked "cached" (with the run that produced
it), instead of running the same tests in the same image again; any change in the code, the suites, the
image, the interpreter or the pytest folder changes the key and the suite runs. Only passes are
remembered: a failure, error or timeout always runs again. `--no-cache` runs everything regardless.
With an image store (travel.py) the records travel with the images to other machines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .engine import Engine
from .model import Outcome, SuiteResult
from .records import suite_from_dict, suite_to_dict, write_atomic
from .travel import Store


def memo_key(*parts: str) -> str:
    """A record's name from what decided it (suites.Runner declares the parts; the harness is one of them)."""
    h = hashlib.sha256(b"mcplab-suite")
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
    def __init__(self, directory: Path, *, enabled: bool = True, engine: Engine | None = None,
                 stores: Sequence[Store] = ()) -> None:  # fmt: skip
        self.directory = directory
        self.enabled = enabled
        self.engine = engine
        self.stores = stores

    def get(self, key: str) -> SuiteResult | None:
        if not self.enabled:
            return None
        path = self.directory / f"{key}.json"
        data = path.read_bytes() if path.is_file() else self._fetch(key)
        if data is None:
            return None
        try:
            result = suite_from_dict(json.loads(data))
        except (ValueError, TypeError, KeyError):
            return None
        if result.outcome is not Outcome.PASSED:
            return None
        if not path.is_file():
            write_atomic(path, data)
        self._share(key, data)  # a pass remembered here travels too, whichever run produced it
        return replace(result, cached=True)

    def _fetch(self, key: str) -> bytes | None:
        if self.engine is None:
            return None
        return next((data for store in self.stores if (data := store.fetch_record(self.engine, key))), None)

    def put(self, key: str, result: SuiteResult) -> None:
        if result.outcome is Outcome.PASSED and not result.cached:
            data = json.dumps(suite_to_dict(result)).encode()
            write_atomic(self.directory / f"{key}.json", data)
            self._share(key, data)

    def _share(self, key: str, data: bytes) -> None:
        engine = self.engine
        if engine is None:
            return
        for store in self.stores:
            if not store.has_record(engine, key):
                store.keep_record(engine, key, data)
