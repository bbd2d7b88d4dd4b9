"""Idle workers are retired (issue 37, item 5): a burst's threads do not stay for good, and the pool starts
new ones on demand as before, within --max-requests."""

import threading
import time

from mcpserver.httpd._workers import KEPT_WORKERS, Workers
from mcptest import SLOW_TOOLS, HttpServer, call

BURST = 8  # concurrent calls: as many workers
IDLE_SECONDS = 0.5  # --worker-idle-seconds, short for the test (the default is 60)
PATIENCE = 30  # seconds to wait for what should take well under one: a busy machine is slow, not wrong


def threads_of(server):
    with open(f"/proc/{server.process.pid}/status") as status:
        return int(next(line for line in status if line.startswith("Threads:")).split()[1])


def eventually(condition, what):
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def burst(server, release, count):
    """`count` held calls at once; returns their threads, once the server has said each started, and their
    statuses' list (filled as they end, after `release` exists)."""
    answers = []
    started = server.stderr.count("held: started")
    callers = [threading.Thread(target=lambda: answers.append(server.post(call("held", path=str(release)))[0]))
               for _ in range(count)]
    for caller in callers:
        caller.start()
    eventually(lambda: server.stderr.count("held: started") >= started + count,
               lambda: f"the calls did not all start: {server.stderr}")
    return callers, answers


def test_a_bursts_workers_are_retired_at_rest_down_to_the_kept_ones_and_a_new_burst_is_served(tmp_path):
    with HttpServer(SLOW_TOOLS, "--worker-idle-seconds", str(IDLE_SECONDS), "--max-requests", str(BURST)) as server:
        base = threads_of(server)  # no worker yet: the main thread and the loop's
        floor = base + KEPT_WORKERS
        for round in range(2):
            release = tmp_path / f"release{round}"
            callers, answers = burst(server, release, BURST)
            assert threads_of(server) == base + BURST, "a worker for each call running, and no more (--max-requests)"
            release.touch()
            for caller in callers:
                caller.join(PATIENCE)
            assert answers == [200] * BURST
            eventually(lambda: threads_of(server) == floor,
                       lambda: f"{threads_of(server)} threads at rest, not {floor}: idle workers were kept")
        time.sleep(4 * IDLE_SECONDS)  # the kept workers stay, and serve
        assert threads_of(server) == floor
        assert server.post(call("pid"))[0] == 200


def test_the_pool_retires_idle_threads_down_to_kept_and_starts_new_ones_on_demand():
    gate = threading.Event()
    ran = []
    workers = Workers(4, 0, lambda job: (gate.wait(PATIENCE), ran.append(job)), idle_seconds=0.05, kept=1)
    for done in (4, 8):
        gate.clear()
        assert all(workers.submit(n) for n in range(4))
        assert workers.threads == 4
        assert not workers.submit("a fifth"), "the bound holds: no queue, no fifth thread"
        gate.set()
        eventually(lambda: len(ran) == done, lambda: f"ran {ran}")  # noqa: B023 (called in the loop's turn)
        eventually(lambda: workers.threads == 1, lambda: f"{workers.threads} threads left, not 1")
    time.sleep(0.3)
    assert workers.threads == 1, "the kept one stays"


def test_under_a_steady_trickle_of_jobs_the_surplus_workers_still_retire():
    # Jobs handed round in turn would give each of four workers one every 4th job, 80 ms apart here, and none
    # would ever idle 0.3 s: the most recently idle worker takes the job, so three stay idle and go.
    gate = threading.Event()
    ran = []
    workers = Workers(4, 0, lambda job: (gate.wait(PATIENCE), ran.append(job)), idle_seconds=0.3, kept=1)
    assert all(workers.submit(n) for n in range(4))
    gate.set()
    eventually(lambda: len(ran) == 4, lambda: f"ran {ran}")
    deadline = time.monotonic() + PATIENCE
    while workers.threads > 1:
        assert time.monotonic() < deadline, f"{workers.threads} workers kept under a trickle of one job at a time"
        count = len(ran)
        assert workers.submit("trickle")
        eventually(lambda: len(ran) > count, lambda: f"ran {len(ran)}")  # noqa: B023 (called in the loop's turn)
        time.sleep(0.02)
