"""A legacy session's living state, held by the transport that serves it (spec/LEGACY.md §2, §5-§7).

Rules of this module:
- The negotiated part (revision, client capabilities) is a frozen LegacySession from the core; what
  changes over the session lives here: the log level, the resource subscriptions, and the server's
  own requests waiting for the client's answers.
- The server's requests have ids of their own ("mcpserver-1", ...), never a client's. An answer is
  matched to its waiting call by id within this session only; an answer for an id this session never
  asked, or asked and stopped waiting for, is refused (`answer` says False), and is never delivered
  to anyone else.
- A call waits for its answer at most `answer_timeout` seconds; a cancelled call stops waiting at
  once. Either way the client is told with notifications/cancelled for the server's request, and the
  tool gets ClientRefused (timeout) or Cancelled.
- Session-wide notifications (list changes; updates of subscribed resources) go through `notify`,
  the session's own channel (stdout on stdio; the standalone GET stream over HTTP), shaped for the
  revision and without the modern subscription id.
- The subscriptions are the session's, not a stream's: made before any channel exists, kept while none
  is attached (an HTTP client's GET stream dropped), and ended with the session (close: DELETE, expiry,
  or its living state reclaimed). At most MAX_SUBSCRIPTIONS per session.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

from .. import _log
from .._context import Cancelled, ClientRefused, Flight, Peer
from .._forks import renew_at_fork
from .._subscriptions import LIST_CHANGED, Listener
from ..errors import InternalError, ProtocolError
from ._shaping import LEGACY_VERSIONS, LOG_LEVELS, LegacySession, shape_notification, shape_request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from .._context import Negotiated
    from .._server import Server
    from ..store import SessionStore

__all__ = ["DEFAULT_ANSWER_TIMEOUT", "DEFAULT_LOG_LEVEL", "DEFAULT_SESSION_TTL", "MAX_SESSION_STATES",
           "MAX_SUBSCRIPTIONS", "LegacyPeer", "SessionTable"]

log = _log.get("mcpserver.session")

DEFAULT_ANSWER_TIMEOUT = 300.0  # seconds a tool waits for the client's answer (a person may be filling a form)
DEFAULT_LOG_LEVEL = "info"  # before the client sets one (LEGACY.md §6 leaves it open)
# Resources one session may subscribe to: templates match without end, and each subscription is kept for the
# whole session, so a client could otherwise grow it without bound.
MAX_SUBSCRIPTIONS = 1024


class _Waiting:
    __slots__ = ("answer", "arrived")

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.answer: Any = None


class _SessionListener(Listener):
    """The session as a listener of the registry: every list it was told of, and the URIs it subscribed, held
    for the whole session; what it hears goes through `notify` when a channel carries the session's messages."""

    __slots__ = ("_session", "notify")

    def __init__(self, session: Negotiated, kinds: set[str]):
        super().__init__(None, kinds, set(), Flight())
        self._session = session
        self.notify: Optional[Callable[[dict[str, Any]], None]] = None  # None: no channel yet, or none now

    def send(self, method: str, params: Optional[dict[str, Any]] = None) -> None:
        notify = self.notify
        if notify is None:
            return
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        notify(shape_notification(message, self._session))


class LegacyPeer(Peer):
    """The client of one legacy session, as its requests see it (mcpserver._context.Peer)."""

    transport = "stdio"  # a session over HTTP says "http" (SessionTable)

    def __init__(self, server: Server, session: Negotiated, notify: Optional[Callable[[dict[str, Any]], None]],
                 answer_timeout: float = DEFAULT_ANSWER_TIMEOUT):
        self.server = server
        self.session = session
        self.answer_timeout = answer_timeout
        self.initialized = False  # notifications/initialized arrived
        self._level = LOG_LEVELS.index(DEFAULT_LOG_LEVEL)
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}
        self._ids = itertools.count(1)
        self._listener = _SessionListener(session, {kind for kind, _ in LIST_CHANGED.values()})
        self._listening = False  # the listener is open in server.subscriptions: from the first channel to close()
        self._closed = False
        self.expires = float("inf")  # when the session's id stops being honoured (SessionTable sets it)
        self.key: Optional[str] = None  # the session's key in the store that keeps it beyond this process
        self._kept: Optional[SessionStore] = None
        self.streams: dict[str, Any] = {}  # the transport's: over HTTP, the session's resumable SSE streams
        self._calls: dict[Any, Flight] = {}  # the client's requests in flight, for its notifications/cancelled
        if notify is not None:
            self.attach(notify)

    # -- the client's requests in flight (over HTTP each is a POST of its own) -------------------------

    def track(self, request_id: Any, flight: Flight) -> Callable[[], None]:
        """Note a request in flight, so a cancel POSTed later finds it; returns what forgets it."""
        with self._lock:
            self._calls[request_id] = flight

        def forget() -> None:
            with self._lock:
                if self._calls.get(request_id) is flight:
                    del self._calls[request_id]

        return forget

    def cancel(self, request_id: Any) -> None:
        """notifications/cancelled from the client: stop that request (an unknown id is ignored)."""
        with self._lock:
            flight = self._calls.get(request_id)
        if flight is not None:
            flight.cancel()

    # -- session-wide notifications -----------------------------------------------------------------

    def attach(self, notify: Callable[[dict[str, Any]], None]) -> None:
        """Send list changes and subscribed updates through `notify` from now on (it replaces any other)."""
        with self._lock:
            if self._closed:
                return
            self._listener.notify = notify
            opening, self._listening = not self._listening, True
        if opening:  # the session hears from now until it ends, whatever carries it meanwhile
            self.server.subscriptions.open(self._listener, bounded=False)

    def detach(self, notify: Callable[[dict[str, Any]], None]) -> None:
        """`notify` no longer carries the session's messages (its stream is gone); the subscriptions stay."""
        with self._lock:
            if self._listener.notify == notify:  # bound methods are made anew on each access: equal, not same
                self._listener.notify = None

    def keep_in(self, store: SessionStore, key: str) -> None:
        """Keep the subscriptions in `store` too (under `key`), and start from what it holds: a session whose
        living state was reclaimed, or served by another process of a shared store, keeps them."""
        self.key, self._kept = key, store
        try:
            self._listener.uris = store.subscriptions(key)
        except ProtocolError as unavailable:  # the store is down: serve the session on, from what is here
            log.warning("a session's subscriptions cannot be read from the store: %s", unavailable.message)

    def resync(self) -> None:
        """What a client that missed session-wide notifications must re-read: every list the server offers,
        every resource it subscribed to (sent through the session's channel)."""
        capabilities = self.server.capabilities()
        for kind, method in LIST_CHANGED.values():
            if kind in capabilities:
                self._listener.send(method)
        for uri in sorted(self._listener.uris):
            self._listener.send("notifications/resources/updated", {"uri": uri})

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the session has ended (at once if it has)."""
        self._listener.on_end(callback)

    def subscribe(self, uri: str, subscribed: bool) -> None:
        with self._lock:
            uris = self._listener.uris
            if subscribed and uri not in uris and len(uris) >= MAX_SUBSCRIPTIONS:
                raise InternalError(f"Too many subscriptions: a session subscribes to at most {MAX_SUBSCRIPTIONS} "
                                    "resources", data={"limit": MAX_SUBSCRIPTIONS})
            # replaced, never changed: a publisher reading the set meanwhile sees it whole
            self._listener.uris = uris | {uri} if subscribed else uris - {uri}
            kept = self._kept
        if kept is not None and self.key is not None:
            kept.subscribe(self.key, uri, subscribed)

    # -- logging ------------------------------------------------------------------------------------

    def set_log_level(self, level: str) -> None:
        self._level = LOG_LEVELS.index(level)

    def wants_log(self, level: str) -> bool:
        return level in LOG_LEVELS and LOG_LEVELS.index(level) >= self._level

    # -- the server's own requests ------------------------------------------------------------------

    def request(self, method: str, params: dict[str, Any], flight: Flight) -> dict[str, Any]:
        try:
            params = shape_request(method, params, self.session)
        except ValueError as exc:
            raise ClientRefused(f"Cannot send {method}: {exc}") from None
        request_id = f"mcpserver-{next(self._ids)}"
        waiting = _Waiting()
        with self._lock:
            self._waiting[request_id] = waiting
        try:
            if not flight.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}):
                if not flight.streams:  # over HTTP, a POST that did not accept text/event-stream
                    raise ClientRefused(f"Cannot send {method}: this request has no stream to the client "
                                        "(over HTTP, accept text/event-stream)")
                raise Cancelled(f"the request was cancelled before {method} could be sent")
            flight.on_cancel(waiting.arrived.set)
            arrived = waiting.arrived.wait(self.answer_timeout)
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if flight.cancelled:
            self._withdraw(request_id, flight, "the call was cancelled")
            raise Cancelled(f"the request was cancelled while waiting for {method}")
        if not arrived:
            self._withdraw(request_id, flight, "no answer in time")
            raise ClientRefused(f"The client did not answer {method} within {self.answer_timeout:g} s")
        if waiting.answer is None:  # the session ended (close()): no one is left to tell
            raise ClientRefused(f"The session ended before the client answered {method}")
        return self._result(method, waiting.answer)

    def _withdraw(self, request_id: str, flight: Flight, reason: str) -> None:
        params: dict[str, Any] = {"requestId": request_id, "reason": reason}
        if not flight.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}):
            self._listener.send("notifications/cancelled", params)  # the call's own stream is done: the session's

    @staticmethod
    def _result(method: str, response: Any) -> dict[str, Any]:
        error, result = response.error, response.result
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            raise ClientRefused(f"The client answered {method} with an error: {message or error!r}")
        if not isinstance(result, dict):
            raise ClientRefused(f"The client's answer to {method} is not an object")
        return result

    def answer(self, response: Any) -> bool:
        """Deliver a ClientResponse to the call waiting for it; False when none in this session is."""
        with self._lock:
            waiting = self._waiting.pop(response.id, None) if isinstance(response.id, str) else None
        if waiting is None:
            log.info("an answer for id %r, which this session is not waiting for: refused", response.id)
            return False
        waiting.answer = response
        waiting.arrived.set()
        return True

    def close(self) -> None:
        """The session ended: stop listening (whoever watches its end is told), and wake every call still
        waiting (they see no answer)."""
        with self._lock:
            self._closed, listening, self._listening = True, self._listening, False
            self._listener.notify = None
        if listening:
            self.server.subscriptions.close(self._listener)
        self._listener.ended.set()
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
            calls, self._calls = list(self._calls.values()), {}
        for flight in calls:  # the session is over: so are its requests
            flight.cancel()
        for entry in waiting:
            entry.arrived.set()


# -- legacy sessions over Streamable HTTP (LEGACY.md §4.3) -------------------------------------------------

DEFAULT_SESSION_TTL = 24 * 3600.0  # seconds a session id is honoured after its initialize
MAX_SESSION_STATES = 1000  # sessions whose living state (a stream, waiting calls, a log level) one process keeps
MAX_CAPABILITIES_CHARS = 4096  # what of the client's capabilities and info a session id may carry
MAX_ENDED = 10_000  # ended sessions remembered (each until its id would have expired anyway)


class SessionTable:
    """The legacy sessions one HTTP process serves.

    A session id is the negotiated session itself, sealed (HMAC, the requestState key) and bound to the
    caller's principal: any replica holding the key serves the session's plain requests, and a forged,
    foreign, expired or another principal's id is unknown (404). What lives in one process (the
    standalone stream, calls waiting for the client's answer, the log level, subscriptions) is a
    LegacyPeer kept here for at most MAX_SESSION_STATES sessions: the least recently used is reclaimed
    (its stream ends; a later request gets a fresh state). DELETE ends a session: its id is then unknown
    here (other replicas learn it only from their own DELETE: route a session to one process,
    docs/guides/sessions.md)."""

    def __init__(self, server: Server, sealer: Any, ttl: float = DEFAULT_SESSION_TTL,
                 max_states: int = MAX_SESSION_STATES):
        self.server = server
        self.sealer = sealer
        self.ttl = ttl
        self.max_states = max_states
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._states: dict[str, LegacyPeer] = {}  # insertion order is recency: moved to the end when used
        self._ended: dict[str, float] = {}

    def open(self, session: Negotiated, principal: str) -> str:
        """A new session's id. ValueError if what it would carry is too large to travel in a header."""
        value = {"r": session.revision, "c": session.client_capabilities, "i": session.client_info, "w": principal,
                 "n": os.urandom(12).hex(), "x": int(time.time() + self.ttl)}
        sealed = self.sealer.seal_value("session", value, self.ttl)
        if len(sealed) > MAX_CAPABILITIES_CHARS * 2:
            raise ValueError(f"the client's capabilities and info are over {MAX_CAPABILITIES_CHARS} characters")
        return sealed  # type: ignore[no-any-return]

    @property
    def store(self) -> SessionStore:
        """Where sessions' subscriptions and streams' events are kept: the server's store (--store)."""
        from ..store import shared  # a legacy HTTP session's first use: the server's store opens

        return shared(self.server).sessions

    def find(self, session_id: str, principal: str) -> Optional[LegacyPeer]:
        """The session's living state, made when first needed; None for an id that is not a live session
        of this caller."""
        value = self.sealer.open_value("session", session_id, MAX_CAPABILITIES_CHARS * 2)
        if value is None or value.get("w") != principal or not isinstance(value.get("c"), dict) \
                or value.get("r") not in LEGACY_VERSIONS or not isinstance(value.get("n"), str):
            return None
        with self._lock:
            peer = None if session_id in self._ended else self._states.pop(session_id, None)
            if peer is not None:
                self._states[session_id] = peer  # now the most recently used
        if peer is None:  # made outside the lock: its subscriptions may come from a database
            info = value.get("i")
            made = LegacyPeer(self.server, LegacySession(value["r"], value["c"], info if isinstance(info, dict)
                                                         else {}), None)
            made.transport = "http"
            expires = value.get("x")
            made.expires = expires if isinstance(expires, int) else time.time() + self.ttl
            made.keep_in(self.store, value["n"])
            with self._lock:
                if session_id in self._ended:
                    return None
                peer = self._states.setdefault(session_id, made)  # or the one another request made meanwhile
        with self._lock:
            reclaimed = self._reclaim_locked()
        for old, expired in reclaimed:
            old.close()
            if expired and old.key is not None:
                self.store.end(old.key)
        return peer

    def _reclaim_locked(self) -> list[tuple[LegacyPeer, bool]]:
        """(peer, expired) to close: past max_states, the least recently used (its store keeps what it had); and
        expired sessions, which find() never touches again, so they drift to the front of the recency order
        and end there, their subscriptions and events with them."""
        reclaimed, now = [], time.time()
        while self._states:
            oldest = self._states[next(iter(self._states))]
            expired = oldest.expires <= now
            if len(self._states) <= self.max_states and not expired:
                break
            reclaimed.append((self._states.pop(next(iter(self._states))), expired))
        return reclaimed

    def end(self, session_id: str) -> None:
        with self._lock:
            peer = self._states.pop(session_id, None)
            self._ended[session_id] = time.time() + self.ttl
            if len(self._ended) > MAX_ENDED:
                now = time.time()
                self._ended = {key: until for key, until in self._ended.items() if until > now}
                while len(self._ended) > MAX_ENDED:
                    self._ended.pop(next(iter(self._ended)))
        if peer is not None:
            peer.close()
        value = self.sealer.open_value("session", session_id, MAX_CAPABILITIES_CHARS * 2)
        if value is not None and isinstance(value.get("n"), str):
            self.store.end(value["n"])

    def __len__(self) -> int:
        return len(self._states)
