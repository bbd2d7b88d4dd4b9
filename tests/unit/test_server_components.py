"""Server.component: a part made once, when first needed, whose making may need another part."""

import threading

from mcpserver import Server


def in_a_thread(make):
    """make()'s value, from a daemon thread: a deadlock fails the test instead of hanging the suite."""
    made = []
    thread = threading.Thread(target=lambda: made.append(make()), daemon=True)
    thread.start()
    thread.join(30)
    assert made, "deadlocked"
    return made[0]


def test_a_component_whose_making_asks_for_another_is_made():
    server = Server("components")
    outer = in_a_thread(lambda: server.component("outer", lambda: ("outer", server.component("inner", lambda: 1))))
    assert outer == ("outer", 1)
    assert server.component("inner", lambda: 2) == 1, "made once"


def test_the_task_manager_opens_the_store_it_needs():
    # The first task call of a server that had not opened its store yet took the registry's lock for the task
    # manager and asked for it again for the store: every later task call and legacy session request hung
    # (make soak: about 20 workers, for good, and no exit on SIGTERM).
    from mcpserver.store import shared
    from mcpserver.tasks import task_manager

    server = Server("components")
    manager = in_a_thread(lambda: task_manager(server))
    assert manager is task_manager(server)
    assert manager.tasks is not None and shared(server).store is not None
