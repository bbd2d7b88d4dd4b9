"""A fork at any moment (issue 50, item 3): every lock the package holds, taken by another thread at the fork, and a
child that then serves a worker's requests (fork_probe.py says how). gunicorn's pre-fork model forks the master that
built the app (--preload), and a tool may fork: neither child may inherit a lock held for ever."""

import os
import subprocess
import sys

from mcptest import ROOT

PROBE = os.path.join(ROOT, "tests", "task_store", "fork_probe.py")


def test_a_child_forked_while_any_lock_of_the_package_is_held_serves(spec, tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    done = subprocess.run([sys.executable, PROBE, spec, str(metrics)], capture_output=True, text=True, timeout=1200)
    print(done.stdout.splitlines()[-1] if done.stdout else done.stderr[-2000:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "forked while each of" in done.stdout
