"""What the server's store (--store) shares, opened once per server: the tasks, and what legacy HTTP sessions
keep beyond one connection (their streams' events, their subscriptions).

Rules of this module:
- One per Server (a component), made when first needed: by the first task, the first legacy HTTP session, or the
  command line, mcpserver.run and create_app, which open it at start-up so that a store that cannot serve is
  refused there, and so that every process of a shared store publishes its changes on the bus from the start.
- A store with a bus (_bus) joins the server's listeners to it: the changes this process makes go out, the
  other processes' come in; a task's change is read from the store here, as tasks/get reads it.
"""

from __future__ import annotations

from ._open import open_task_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._server import Server
    from ._store import TaskStore

__all__ = ["Shared", "shared"]


class Shared:
    """The server's store and what comes with it."""

    def __init__(self, server: Server):
        self.store = open_task_store(server.task_store)
        self.sessions = self.store.session_store()
        self.bus = self.store.bus()
        if self.bus is not None:
            self.bus.deliver = lambda change: _deliver(server, self.store, change)
            server.subscriptions.relay = self.bus


def shared(server: Server) -> Shared:
    """The server's, opened on first use; ConfigError if its store cannot serve."""
    return server.component("store", lambda: Shared(server))  # type: ignore[no-any-return]


def _deliver(server: Server, store: TaskStore, change: dict[str, Any]) -> None:
    """A change another process published, to this process's listeners."""
    subscriptions = server.subscriptions
    if change.get("kind") != "task":
        subscriptions.receive(change)
        return
    task_id = str(change.get("id"))
    if subscriptions.listens_to_task(task_id):  # the read only for a task someone here follows
        record = store.load(task_id)
        if record is not None:
            subscriptions.task_changed(task_id, record.detailed(), relay=False)
