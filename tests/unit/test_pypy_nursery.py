"""PyPy's nursery, bounded by the command line whatever cache the CPU reports (_pypy.py, docs/platforms/pypy.md).

PyPy picks half the cache /proc/cpuinfo reports (1 MiB below 2 MiB). Two kinds of test:
- In any PyPy (every lab PyPy cell, the big-cache ones too): a server started as a user starts it reports a
  nursery within the bound.
- On a host where we may mount (root, unshare, Debian's pypy3 installed): a /proc/cpuinfo that reports a
  480 MiB cache, as a big cloud host's does, shown to PyPy alone in a mount namespace of its own, so each
  case has a big-cache host and a small-cache host side by side on this one machine.
"""

import json
import os
import shutil
import subprocess
import sys

import mcpserver
import pytest
from mcptest import call, line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.dirname(os.path.abspath(mcpserver.__file__))  # the copy under test: the lab may install it
BOUND = 4 * 2**20
MIB = 2**20

PROBE = """
import gc, os
from mcpserver import Server

server = Server("nursery-probe", "1.0.0")


@server.tool()
def nursery() -> dict:
    \"\"\"This process's nursery, and who chose it.\"\"\"
    raw = getattr(gc.get_stats(), "_s", None)
    return {"bytes": int(getattr(raw, "nursery_size", 0) or 0), "pid": os.getpid(),
            "setting": os.environ.get("PYPY_GC_NURSERY")}
"""


@pytest.fixture
def probe(tmp_path):
    target = tmp_path / "nursery_probe.py"
    target.write_text(PROBE)
    return str(target)


def structured(response):
    return response["result"]["structuredContent"]


def without_setting():
    """The environment a user's server starts in: no PYPY_GC_NURSERY of anyone's."""
    return {key: value for key, value in os.environ.items() if key != "PYPY_GC_NURSERY"}


@pytest.mark.skipif(sys.implementation.name != "pypy", reason="the nursery is PyPy's")
def test_a_pypy_server_started_as_a_user_starts_it_has_a_bounded_nursery(probe):
    done = subprocess.run([sys.executable, "-m", "mcpserver", probe], input=line(call("nursery")),
                          capture_output=True, env=without_setting(), timeout=120, check=True)
    found = structured(json.loads(done.stdout.splitlines()[0]))
    assert 0 < found["bytes"] <= BOUND, found


# --- on this host: a big-cache CPU and a small-cache CPU, each in a mount namespace of its own ----------

PYPY = shutil.which("pypy3")
UNSHARE = shutil.which("unshare")
MOUNTS = PYPY and UNSHARE and os.geteuid() == 0 and sys.platform.startswith("linux")


def cpuinfo(cache_kb: int) -> str:
    """This machine's /proc/cpuinfo with every `cache size` line saying `cache_kb`."""
    with open("/proc/cpuinfo") as real:
        lines = real.read().splitlines()
    said = [f"cache size\t: {cache_kb} KB" if text.startswith("cache size") else text for text in lines]
    if not any(text.startswith("cache size") for text in lines):  # a CPU that reports none: give it one
        said.insert(1, f"cache size\t: {cache_kb} KB")
    return "\n".join(said) + "\n"


def on_cpu(tmp_path, cache_kb, argv, env=None, stdin=b""):
    """Run argv where /proc/cpuinfo reports `cache_kb`, in a mount namespace of its own, importing the mcpserver
    these tests import: the source tree's, or in the lab's install suite the installed copy, whose site-packages
    (another interpreter's, with pytest in it) PyPy is not shown."""
    fake = tmp_path / f"cpuinfo-{cache_kb}"
    fake.write_text(cpuinfo(cache_kb))
    path = tmp_path / "path"
    if not path.exists():
        path.mkdir()
        (path / "mcpserver").symlink_to(PACKAGE_DIR)
    script = 'mount --bind "$0" /proc/cpuinfo && exec "$@"'
    environment = dict(without_setting(), PYTHONPATH=str(path), **(env or {}))
    return subprocess.run([UNSHARE, "--mount", "sh", "-c", script, str(fake), *argv], input=stdin,
                          capture_output=True, env=environment, timeout=120)  # fmt: skip


def needs_mounts(test):
    """Host-only: it shows Debian's pypy3 a /proc/cpuinfo of its own in a mount namespace, as root (`make test` installs
    pypy3), where the lab's images run as a user."""
    test = pytest.mark.skipif(not MOUNTS, reason="needs root, unshare and Debian's pypy3 (apt-get install pypy3)")(test)
    return pytest.mark.host_only("mounts a /proc/cpuinfo of its own for Debian's pypy3, as root")(test)
BIG, SMALL = 491520, 512  # KB: what a 480 MiB-cache cloud host reports, and this project's usual machine


@needs_mounts
@pytest.mark.parametrize("cache_kb, picks", [(BIG, 240 * MIB), (SMALL, 1 * MIB)])
def test_the_control_pypy_sizes_its_nursery_from_the_cache_cpuinfo_reports(tmp_path, cache_kb, picks):
    done = on_cpu(tmp_path, cache_kb, [PYPY, "-c", "import gc; print(gc.get_stats()._s.nursery_size)"])
    assert int(done.stdout) == picks, done.stderr


@needs_mounts
@pytest.mark.parametrize("cache_kb", [BIG, SMALL])
def test_the_command_line_bounds_the_nursery_on_a_big_cache_and_a_small_one(tmp_path, probe, cache_kb):
    done = on_cpu(tmp_path, cache_kb, [PYPY, "-m", "mcpserver", probe], stdin=line(call("nursery")))
    found = structured(json.loads(done.stdout.splitlines()[0]))
    assert 0 < found["bytes"] <= BOUND, (found, done.stderr)
    # Started again only where PyPy picked more than the bound, and then with the bound named.
    assert found["setting"] == ("4MB" if cache_kb == BIG else None), found


@needs_mounts
def test_an_operators_own_nursery_is_left_alone(tmp_path, probe):
    done = on_cpu(tmp_path, BIG, [PYPY, "-m", "mcpserver", probe], env={"PYPY_GC_NURSERY": "64MB"},
                  stdin=line(call("nursery")))
    assert structured(json.loads(done.stdout.splitlines()[0]))["bytes"] == 64 * MIB


@needs_mounts
def test_started_again_it_is_the_same_process_serving_the_same_pipes(tmp_path, probe):
    # exec keeps the PID: a client (or PID 1's parent) that waits for it still waits for the server.
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text("import os, sys\nprint(os.getpid(), flush=True)\nos.execv(sys.executable, "
                       "[sys.executable, '-m', 'mcpserver', sys.argv[1]])\n")
    done = on_cpu(tmp_path, BIG, [PYPY, str(wrapper), probe], stdin=line(call("nursery")))
    first, answer = done.stdout.splitlines()[:2]
    assert structured(json.loads(answer))["pid"] == int(first)


@needs_mounts
def test_a_server_that_cannot_start_again_says_how_to_bound_it(tmp_path, probe):
    # mcpserver.run from a script: the script's own code has run, so the server warns instead of exec.
    script = tmp_path / "script.py"
    script.write_text("import sys\nsys.path.insert(0, sys.argv[1].rsplit('/', 1)[0])\n"
                      "from nursery_probe import server\nimport mcpserver\nsys.exit(mcpserver.run(server))\n")
    done = on_cpu(tmp_path, BIG, [PYPY, str(script), probe], stdin=line(call("nursery")))
    assert structured(json.loads(done.stdout.splitlines()[0]))["bytes"] == 240 * MIB
    assert b"PyPy sized its nursery at 240 MiB" in done.stderr and b"PYPY_GC_NURSERY=4MB" in done.stderr


def test_settings_the_lab_gives_pytest_alone_are_not_passed_to_what_the_tests_start():
    # The lab runs pytest on PyPy with a nursery of its own (matrix/budgets.py DRIVER_ENV) and names it in
    # MCPTEST_DRIVER_ONLY; tests/conftest.py takes both out before any test can start a process.
    conftest = os.path.join(ROOT, "tests", "conftest.py")
    probe = (f"import os, runpy; runpy.run_path({conftest!r}); "
             "print([os.environ.get(n) for n in ('PYPY_GC_NURSERY', 'MCPTEST_DRIVER_ONLY', 'KEPT')])")
    env = dict(os.environ, PYPY_GC_NURSERY="4MB", MCPTEST_DRIVER_ONLY="PYPY_GC_NURSERY", KEPT="yes")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "[None, None, 'yes']", done.stderr
