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
