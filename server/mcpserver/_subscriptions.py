"""subscriptions/listen: who is listening for what, and the notifications they asked for (WIRE.md §14.1).

Rules of this module:
- A listener names the notification types it wants; it is sent only those, each carrying
  `io.modelcontextprotocol/subscriptionId` (the listen request's id), and only after its
  acknowledgement, which names the subset the server honours.
- At most `limit` listen streams at once; beyond that a listen request is refused with a clear error. A legacy
  session's own listener (it hears for the whole session, stream or none) is bounded by the sessions a process
  keeps instead (legacy MAX_SESSION_STATES), so it is opened unbounded.
- Publishing never waits for a listener: each one's flight decides how its notification is
  carried (stdout on stdio; a coalescing buffer per SSE stream over HTTP).
- Ending (shutdown) wakes every listen request, which then answers with its graceful result.
- With a shared store (--store on SQLite or PostgreSQL) `relay` is its bus (store._bus): every change made
  here is told to this process's listeners and handed to the bus, and `receive` tells them the changes other
  processes made, which are not handed on again.
- A listener's end is an Event a transport may wait on, or watch with a callback (`on_end`), so a
  transport that drives its streams from an event loop holds no thread per open stream.
"""

from __future__ import annotations

import threading

from ._context import Flight
from ._forks import renew_at_fork
from ._wire import META_SUBSCRIPTION
from .errors import InternalError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["DEFAULT_MAX_LISTENERS", "LIST_CHANGED", "Ending", "Listener", "Subscriptions"]

# An open stream costs a buffer and, over HTTP, a connection, never a thread: the bound is on memory and
# connections, and sits well below the HTTP server's connection bound so listeners cannot fill it.
DEFAULT_MAX_LISTENERS = 512
# filter key -> (registry kind, notification method)
LIST_CHANGED = {"toolsListChanged": ("tools", "notifications/tools/list_changed"),
                "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
                "resourcesListChanged": ("resources", "notifications/resources/list_changed")}


class Ending(threading.Event):
    """A threading.Event that also calls back, once each, whoever asked to be told when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks_lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._callbacks_lock:
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the event is set (at once, on this thread, if it already is)."""
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return
        callback()


class Listener:
    """One open subscriptions/listen stream."""

    __slots__ = ("ended", "flight", "kinds", "subscription_id", "task_ids", "uris")

    def __init__(self, subscription_id: Any, kinds: set[str], uris: set[str], flight: Flight,
                 task_ids: frozenset[str] = frozenset()):
        self.subscription_id = subscription_id
        self.kinds = kinds
        self.uris = uris
        self.flight = flight
        self.task_ids = task_ids  # tasks of the Tasks extension it listens to (its caller's own)
        self.ended = Ending()

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the stream is to end (cancelled, or the server shuts down)."""
        self.ended.on_set(callback)

    def send(self, method: str, params: Optional[dict[str, Any]] = None) -> None:
        self.flight.send({"jsonrpc": "2.0", "method": method,
                          "params": {**(params or {}), "_meta": {META_SUBSCRIPTION: self.subscription_id}}})


class Subscriptions:
    """The listeners of one server."""

    def __init__(self, limit: int = DEFAULT_MAX_LISTENERS):
        self.limit = limit
        self.max_seconds: Optional[float] = None  # a listen stream then ends gracefully (--max-listen-seconds)
        self.enabled = True  # False: no listen streams, and no one is told of changes (--no-listen)
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._listeners: tuple[Listener, ...] = ()  # replaced, never changed: publishers iterate without the lock
        self._exempt: set[int] = set()  # ids of the open listeners `limit` does not count (legacy sessions')
        self._ending = False
        self.relay: Optional[Any] = None  # the bus to the other processes of a shared store (store._bus.Bus)

    def open(self, listener: Listener, bounded: bool = True) -> None:
        if not self.enabled:  # a legacy session's listener: it hears nothing, as the capabilities said
            return
        with self._lock:
            if bounded and len(self._listeners) - len(self._exempt) >= self.limit:
                raise InternalError(f"Too many subscriptions: this server serves at most {self.limit} "
                                    "subscriptions/listen streams at once", data={"limit": self.limit},
                                    http_status=503)
            self._listeners = (*self._listeners, listener)
            if not bounded:
                self._exempt.add(id(listener))
            ending = self._ending
        if ending:  # opened while the server shuts down: it ends at once, gracefully (outside the lock:
            listener.ended.set()  # whoever watches the end may close the listener, which takes it)
        if self.relay is not None:  # a listener here: from now on this process hears the others' changes
            self.relay.listen()

    def close(self, listener: Listener) -> None:
        with self._lock:
            kept = tuple(other for other in self._listeners if other is not listener)
            if len(kept) < len(self._listeners):
                self._exempt.discard(id(listener))
            self._listeners = kept

    def __len__(self) -> int:
        return len(self._listeners)

    def list_changed(self, kind: str, relay: bool = True) -> None:
        method = next(method for known, method in LIST_CHANGED.values() if known == kind)
        for listener in self._listeners:
            if kind in listener.kinds:
                listener.send(method)
        if relay:
            self._relay({"kind": "list", "of": kind})

    def resource_updated(self, uri: str, relay: bool = True) -> None:
        for listener in self._listeners:
            if uri in listener.uris:
                listener.send("notifications/resources/updated", {"uri": uri})
        if relay:
            self._relay({"kind": "resource", "uri": uri})

    def task_changed(self, task_id: str, task: dict[str, Any], relay: bool = True) -> None:
        """notifications/tasks: the task as tasks/get shows it, to listeners of that task (TASKS.md §11)."""
        for listener in self._listeners:
            if task_id in listener.task_ids:
                listener.send("notifications/tasks", task)
        if relay:  # its id only: a process with a listener of the task reads it from the store
            self._relay({"kind": "task", "id": task_id})

    def listens_to_task(self, task_id: str) -> bool:
        return any(task_id in listener.task_ids for listener in self._listeners)

    def receive(self, change: dict[str, Any]) -> None:
        """A list or resource change another process made (from the bus), to this process's listeners."""
        kind = change.get("kind")
        if kind == "list" and change.get("of") in {known for known, _ in LIST_CHANGED.values()}:
            self.list_changed(str(change["of"]), relay=False)
        elif kind == "resource" and isinstance(change.get("uri"), str):
            self.resource_updated(change["uri"], relay=False)

    def _relay(self, change: dict[str, Any]) -> None:
        if self.relay is not None and self.enabled:
            self.relay.publish(change)

    def end_all(self) -> None:
        """Shutdown: every listen request, and any opened from now on, ends with its graceful result."""
        with self._lock:
            self._ending = True
            listeners = self._listeners
        for listener in listeners:
            listener.ended.set()
