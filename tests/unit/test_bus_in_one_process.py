"""The notification bus in one process (tests/task_store/test_bus.py runs it between real servers): a change
published by one store's bus is delivered by every other bus of that store and never by its own, the memory store
has none, a process that forks after the bus started publishes in the child as itself, and a closed bus ends its
threads."""

import os
import threading
import time

import pytest
from mcpserver.tasks import MemoryTaskStore, open_task_store

pytest.importorskip("sqlite3")


def bus_of(path, request):
    """A new store's bus, closed after the test with its store."""
    store = open_task_store(path)
    bus = store.bus()
    request.addfinalizer(store.close)
    request.addfinalizer(bus.close)
    return bus


def hearing(bus):
    heard, arrived = [], threading.Event()

    def deliver(change):
        heard.append(change)
        arrived.set()
    bus.deliver = deliver
    bus.listen()
    return heard, arrived


def drained(bus):
    """Once the sender thread has written every queued change."""
    assert bus.flush(10)


def test_a_change_reaches_the_other_buses_of_the_store_and_not_its_own(tmp_path, request):
    path = str(tmp_path / "tasks.db")
    one, other = bus_of(path, request), bus_of(path, request)
    heard_one, _ = hearing(one)
    heard_other, arrived = hearing(other)
    one.publish({"kind": "resource", "uri": "res://a"})
    assert arrived.wait(5)
    time.sleep(0.2)  # several polls: nothing more comes, to either
    assert [(c["kind"], c["uri"]) for c in heard_other] == [("resource", "res://a")]
    assert heard_one == []


def test_the_memory_store_has_no_bus():
    assert MemoryTaskStore().bus() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # as gunicorn forks
def test_a_fork_publishes_as_a_process_of_its_own(tmp_path, request):
    """gunicorn --preload: the parent's bus, copied into a child, publishes from the child with the child's origin,
    so the parent hears it."""
    path = str(tmp_path / "tasks.db")
    bus = bus_of(path, request)
    bus.publish({"kind": "list", "of": "tools"})  # the parent's sender thread runs
    drained(bus)
    go, ready = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.read(go, 1)  # once the parent listens
            bus.publish({"kind": "list", "of": "prompts"})
            drained(bus)  # the child's own sender thread writes it
        finally:
            os._exit(0)
    # The parent listens only after the fork: a receiver thread inside SQLite at the fork could leave the child a
    # library mutex no thread of its own will release (a process must not fork while it polls, nor does gunicorn's
    # master, which has no listeners).
    heard, arrived = hearing(bus)
    os.write(ready, b"x")
    os.waitpid(child, 0)
    os.close(go)
    os.close(ready)
    assert arrived.wait(10)
    assert [c["of"] for c in heard] == ["prompts"]


def test_a_closed_bus_ends_its_threads(tmp_path, request):
    before = set(threading.enumerate())
    bus = bus_of(str(tmp_path / "tasks.db"), request)
    bus.publish({"kind": "list", "of": "tools"})
    bus.listen()
    its_own = [thread for thread in threading.enumerate() if thread not in before]
    assert sorted(thread.name for thread in its_own) == ["mcpserver-bus-receive", "mcpserver-bus-send"]
    bus.close()
    for thread in its_own:
        thread.join(5)
    assert not any(thread.is_alive() for thread in its_own)
