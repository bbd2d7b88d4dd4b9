"""Shared by every suite. The suites need only the standard library and pytest: they run on the
host and unchanged inside every lab image, where `mcpserver` is the copy embedded in the image."""

import os
import random
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:  # the installed (or image-embedded) package wins, so the lab tests what users ship
    import mcpserver  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "server"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "server"),
                                                             os.environ.get("PYTHONPATH")]))

# Settings for this test process alone: the lab gives pytest on PyPy a nursery of its own, so the suite's memory
# is the same whatever cache the machine's CPU reports (matrix/budgets.py), and names it here so that every
# process a test starts (servers above all) starts as a user's would, without it.
for _name in filter(None, os.environ.pop("MCPTEST_DRIVER_ONLY", "").split(",")):
    os.environ.pop(_name, None)

# Tests that only make sense on the host, marked host_only(reason): they read the README or docs/ (not in the lab's
# images), run mypy, drive a browser, or install packages. Wherever the lab runs the suites (MCPLAB_CELL names the
# cell) they are not collected, rather than counted as skips, and each suite's JUnit XML names them
# (matrix/skips.py), so the report names them once; `make test` runs them.
IN_A_CELL = os.environ.get("MCPLAB_CELL", "")
HOST_ONLY = "mcplab-host-only"  # matrix/skips.py reads these JUnit properties
_LEFT_OUT = []


def pytest_collection_modifyitems(config, items):
    if not IN_A_CELL:
        return
    left = [item for item in items if item.get_closest_marker("host_only")]
    if left:
        items[:] = [item for item in items if not item.get_closest_marker("host_only")]
        config.hook.pytest_deselected(items=left)
        _LEFT_OUT[:] = [f"{item.nodeid}: {item.get_closest_marker('host_only').args[0]}" for item in left]


@pytest.fixture(scope="session", autouse=True)
def _name_the_tests_left_out_as_host_only(record_testsuite_property):
    for line in _LEFT_OUT:
        record_testsuite_property(HOST_ONLY, line)


# Stress mode: MCPSERVER_STRESS=N (the lab's free-threaded cells set it) runs every test that takes `jitter`
# N times over, each with its own random seed for its timing and sizes, so a rare race fails the run instead
# of passing by luck. A failing repetition's id carries its seed.
STRESS = int(os.environ.get("MCPSERVER_STRESS") or 0)


def pytest_generate_tests(metafunc):
    if STRESS and "jitter" in metafunc.fixturenames:
        seeds = [random.randrange(2**32) for _ in range(STRESS)]
        metafunc.parametrize("jitter", [random.Random(seed) for seed in seeds],
                             ids=[f"stress{n}-seed{seed}" for n, seed in enumerate(seeds)])


@pytest.fixture
def jitter():
    """None: the test's own fixed timing (stress mode parametrizes this with seeded random generators)."""
    return None
