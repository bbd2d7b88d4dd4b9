"""gunicorn's master under a storm of signals, on the signal queue PyPy gives it (issue 50, item 2's flake).

gunicorn 25+ queues its master's signals in queue.SimpleQueue. PyPy has no C SimpleQueue, and queue's own is a
Semaphore over a Lock that is not reentrant: a signal landing while the master's main loop holds that Lock runs a
handler that waits on it for ever. In the lab's PyPy cells a master told to stop with 102 workers (102 SIGCHLDs)
once hung past its graceful timeout that way. mcpserver.http._host.mend_master gives the master a queue a handler
cannot hang on: the app does it when the master loads it (--preload), mcpserver.http.gunicorn_conf's on_starting
hook without preload.

On CPython the master's queue is C's, which cannot hang, so each test's config file hands gunicorn queue's own
Python SimpleQueue, as PyPy does (on PyPy that changes nothing); the storm is SIGWINCH, which a master that is no
daemon queues and ignores, STORM of them as dense as a stop's burst of SIGCHLDs is at its densest. Without the
mend, the master hung (never answering SIGTERM) or died of a RecursionError (handlers stacked on the held Lock) in
11 of 12 runs, 5 of 6 on CPython and 6 of 6 on PyPy 7.3.19; with it, 10 of 10 exit 0.
"""

import inspect
import os
import queue
import signal
import subprocess
import threading
import time

import pytest
from mcptest import GUNICORN, GUNICORN_MISSING, HAS_GUNICORN, SLOW_TOOLS, free_port, wait_for_port

pytestmark = pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)

PYPY_QUEUE = "import queue\nqueue.SimpleQueue = queue._PySimpleQueue  # what PyPy has: see the module\n"
STORM = 4000  # SIGWINCHs, STORM_GAP apart: dense enough that an unmended master hangs or dies (module)
STORM_GAP = 0.0002
HUNG = 30  # seconds after SIGTERM: a mended master exits within one or two


@pytest.mark.parametrize("mended_by", ["preload", "hook"])
def test_a_master_on_pythons_own_signal_queue_survives_a_storm_of_signals_and_stops(mended_by, tmp_path):
    config = tmp_path / "gunicorn_config.py"
    config.write_text(PYPY_QUEUE + ("from mcpserver.http.gunicorn_conf import on_starting  # noqa: F401\n"
                                    if mended_by == "hook" else ""))
    port = free_port()
    log = tmp_path / "stderr"
    argv = [*GUNICORN, "-c", str(config), "-b", f"127.0.0.1:{port}", "--log-level", "info", "-k", "sync", "-w", "2",
            *(["--preload"] if mended_by == "preload" else []), f"mcpserver.http:create_app({SLOW_TOOLS!r})"]
    with open(log, "wb") as stderr:
        master = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_for_port(port, master, 60, lambda: log.read_text()[-3000:])
        for _ in range(STORM):
            os.kill(master.pid, signal.SIGWINCH)
            time.sleep(STORM_GAP)
        master.send_signal(signal.SIGTERM)
        try:
            status = master.wait(HUNG)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the master hung: still running {HUNG} s after SIGTERM\n{log.read_text()[-3000:]}")
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    assert status == 0, log.read_text()[-3000:]
    said = log.read_text()
    # The hook says when it mended; the app does not. gunicorn before 25 (the 3.9 cells': 23) queues signals in a list
    # and a pipe, which a handler cannot hang on: there is nothing to mend, and the storm must pass all the same.
    import gunicorn.arbiter

    queued = "SimpleQueue" in inspect.getsource(gunicorn.arbiter.Arbiter.__init__)
    assert ("signal queue replaced" in said) == (mended_by == "hook" and queued), said[-3000:]


def test_the_mended_queue_is_first_in_first_out_wakes_a_waiting_get_and_says_empty():
    from mcpserver.http._host import SignalQueue

    signals = SignalQueue([signal.SIGCHLD])
    signals.put_nowait(signal.SIGTERM)
    assert (signals.qsize(), signals.get(), signals.get_nowait(), signals.empty()) == (
        2, signal.SIGCHLD, signal.SIGTERM, True)
    with pytest.raises(queue.Empty):
        signals.get_nowait()
    with pytest.raises(queue.Empty):
        signals.get(timeout=0.05)
    threading.Timer(0.2, signals.put_nowait, (signal.SIGHUP,)).start()
    assert signals.get(timeout=30) == signal.SIGHUP  # woken by the put, long before its timeout
