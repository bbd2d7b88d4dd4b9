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


@pytest.fixture(autouse=True)
def remove_code_images_of_test_trees(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Engine tests build runtime and test images from trees under tmp_path, often with content no later
    run shares; remove those (by the tree's identity label) when the test ends. Python stages and bases
    stay: they are shared by every fixture tree and slow to make again."""
    yield
    if request.node.get_closest_marker("engine") is None:
        return
    from matrix.engine import TREE_LABEL, Engine
    from matrix.lab import tree_identity

    engine = Engine()
    for root in (tmp_path / "tree", tmp_path / "checkout", tmp_path / "clone"):
        for image in engine.images(f"{TREE_LABEL}={tree_identity(root)}"):
            tags = engine.image_facts(image).get("tags") or []
            assert isinstance(tags, list)
            engine.remove_images(*[t for t in tags if "-runtime-" in t or "-test-" in t])
