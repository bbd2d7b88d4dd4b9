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
- A listener's end is an Event a transport may wait on, or watch with a callback (`on_end`), so a
  transport that drives its streams from an event loop holds no thread per open stream.
"""

from __future__ import annotations

import threading

from ._context import Flight
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
        self._listeners: tuple[Listener, ...] = ()  # replaced, never changed: publishers iterate without the lock
        self._exempt: set[int] = set()  # ids of the open listeners `limit` does not count (legacy sessions')
        self._ending = False

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

    def close(self, listener: Listener) -> None:
        with self._lock:
            kept = tuple(other for other in self._listeners if other is not listener)
            if len(kept) < len(self._listeners):
                self._exempt.discard(id(listener))
            self._listeners = kept

    def __len__(self) -> int:
        return len(self._listeners)

    def list_changed(self, kind: str) -> None:
        method = next(method for known, method in LIST_CHANGED.values() if known == kind)
        for listener in self._listeners:
            if kind in listener.kinds:
                listener.send(method)

    def resource_updated(self, uri: str) -> None:
        for listener in self._listeners:
            if uri in listener.uris:
                listener.send("notifications/resources/updated", {"uri": uri})

    def task_changed(self, task_id: str, task: dict[str, Any]) -> None:
        """notifications/tasks: the task as tasks/get shows it, to listeners of that task (TASKS.md §11)."""
        for listener in self._listeners:
            if task_id in listener.task_ids:
                listener.send("notifications/tasks", task)

    def end_all(self) -> None:
        """Shutdown: every listen request, and any opened from now on, ends with its graceful result."""
        with self._lock:
            self._ending = True
            listeners = self._listeners
        for listener in listeners:
            listener.ended.set()
