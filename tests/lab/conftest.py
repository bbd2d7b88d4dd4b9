"""The lab's own tests. Pure ones (plan, cells, bases, report, junit, outcome rules) need nothing; those
marked `engine` drive the real Docker engine: run them with `make test-lab ENGINE=1` (or
`pytest tests/lab -m engine`). Selected without an engine, they fail rather than skip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

LAB_ROOT = Path(__file__).resolve().parents[2]
if str(LAB_ROOT) not in sys.path:
    sys.path.insert(0, str(LAB_ROOT))

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The fixture trees hold suites for the harness to run in cells; they are data here, not tests.
collect_ignore = ["fixtures"]


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from matrix.engine import Engine
    from matrix.errors import EngineError

    found = Engine()
    try:
        found.version()
    except EngineError as exc:
        pytest.fail(f"engine tests need a Docker engine: {exc.message}")
    return found
