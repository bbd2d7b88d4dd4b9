"""What the server's store (--task-store) shares, opened once per server: the tasks, and what legacy HTTP sessions
keep beyond one connection (their streams' events, their subscriptions).

Rules of this module:
- One per Server (a component), made when first needed: by the first task, the first legacy HTTP session, or the
  command line and create_app, which open it at start-up so that a store that cannot serve is refused there.
"""

from __future__ import annotations

from ._open import open_task_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._server import Server

__all__ = ["Shared", "shared"]


class Shared:
    """The server's store and what comes with it."""

    def __init__(self, server: Server):
        self.store = open_task_store(server.task_store)
        self.sessions = self.store.session_store()


def shared(server: Server) -> Shared:
    """The server's, opened on first use; ConfigError if its store cannot serve."""
    return server.component("store", lambda: Shared(server))  # type: ignore[no-any-return]
