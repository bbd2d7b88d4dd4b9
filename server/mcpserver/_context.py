"""A request in flight: the transport's handle on it (Flight) and what its tool sees (Context).

Rules of this module:
- The transport makes a Flight for each request that runs code of the server's author, with
  `emit`, the one writer of its stream (stdout, or the request's SSE response). It cancels the
  flight when the client says so (notifications/cancelled on stdio) or goes away (HTTP).
- After `cancel()` returns, nothing more is sent for the request: every `send` and the transport's
  final answer are checked against the flag under the flight's own lock (WIRE.md §8).
- A tool asks for its Context by annotating a parameter with `Context`; that parameter never
  appears in the input schema. A tool without one pays nothing.
- Progress goes out only when the request carried `_meta.progressToken`, strictly increasing,
  and never after the answer. Once the request is cancelled, `progress()` and `check_cancelled()`
  raise `Cancelled`, so a loop that reports progress stops by itself. A call with a heartbeat
  (mcpserver._heartbeat) hears its beats through the flight too, under the same lock.
- A tool is written once for both eras. In 2026-07-28 `ask` ends the request with input_required
  (MRTR) and the tool runs again with the answers; in a legacy session (a `Peer` is present) it
  sends a real request to the client and waits for its answer. `log` reaches a legacy client at or
  above its level (notifications/message), and the server's log in every era.
"""

from __future__ import annotations

import sys
import threading
import time

from . import _log
from ._forks import renew_at_fork
from ._wire import CAPABILITY_OF_INPUT, META_CAPABILITIES, META_CLIENT_INFO, META_PROGRESS_TOKEN, PROTOCOL_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Protocol
    Emit = Callable[[dict[str, Any]], None]

    class Negotiated(Protocol):
        """What a legacy session's initialize negotiated, fixed for its life (legacy.LegacySession)."""

        revision: str
        client_capabilities: dict[str, Any]
        client_info: dict[str, Any]

        def at_least(self, revision: str) -> bool: ...

__all__ = ["NAMED_BY", "Call", "Cancelled", "ClientRefused", "Context", "Flight", "InputRequired", "Peer"]

log = _log.get("mcpserver.context")
tool_log = _log.get("mcpserver.tool.log")


# The params field that names what a method acts on (a tool, a prompt, a resource, a task).
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "resources/subscribe": "uri",
            "resources/unsubscribe": "uri", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
            "completion/complete": "ref"}


class Call:
    """What a middleware sees of one request: plain data, never the transport's objects."""

    __slots__ = ("_meta", "era", "headers", "method", "name", "params", "principal", "request_id", "started",
                 "transport")

    def __init__(self, request_id: Any, method: str, params: dict[str, Any], principal: Any, transport: str,
                 era: str, headers: Optional[dict[str, str]] = None):
        self.request_id = request_id
        self.method = method
        self.params = params  # as the client sent them: a middleware reads, never changes them
        named = params.get(NAMED_BY.get(method, ""))
        self.name: Optional[str] = named if isinstance(named, str) else (
            named.get("name") or named.get("uri") if isinstance(named, dict) else None)
        self.principal = principal  # mcpserver.auth.Principal when OAuth (or StaticTokens) authenticated one, else None
        self.transport = transport  # "stdio", "http", "in-process" (mcpserver.testing), "cli" (mcpserver call)
        self.era = era  # the revision it is served in: "2026-07-28", or the legacy session's
        self.headers = headers  # over HTTP, a 2026-07-28 request's header fields by lower-case name; else None
        self.started = time.perf_counter()
        self._meta: Optional[dict[str, Any]] = None

    def elapsed(self) -> float:
        """Seconds since the request reached the chain."""
        return time.perf_counter() - self.started

    def add_meta(self, key: str, value: Any) -> None:
        """Put `key` in the result's `_meta` (a name with a prefix of yours: io.example/...)."""
        if self._meta is None:
            self._meta = {}
        self._meta[key] = value

    def __repr__(self) -> str:
        return f"Call({self.method!r}, name={self.name!r}, transport={self.transport!r}, era={self.era!r})"


class Cancelled(BaseException):
    """The request was cancelled: its result will never be sent. Raised by Context.progress and
    check_cancelled; a BaseException, like asyncio.CancelledError, so `except Exception` lets it pass."""


class ClientRefused(Exception):
    """A legacy client answered the server's request with an error, or did not answer in time. Not
    caught, it makes the tool's result an isError saying so."""


class Peer:
    """The client of a legacy session, as a request sees it; the transport implements it (legacy.LegacyPeer)."""

    session: Negotiated

    def request(self, method: str, params: dict[str, Any], flight: Flight) -> dict[str, Any]:
        """Send `method` to the client on `flight`'s stream and wait for its result; Cancelled if the
        request is cancelled meanwhile, ClientRefused for an error answer or none in time."""
        raise NotImplementedError

    def wants_log(self, level: str) -> bool:
        """Whether a record at `level` is at or above the level the client set."""
        raise NotImplementedError

    def set_log_level(self, level: str) -> None:
        raise NotImplementedError

    def subscribe(self, uri: str, subscribed: bool) -> None:
        raise NotImplementedError


class InputRequired(BaseException):
    """The client has not answered yet: the request ends with an input_required result, and runs again
    from the start, with the answers, when the client retries (WIRE.md §14.2)."""

    def __init__(self, requests: dict[str, dict[str, Any]]):
        super().__init__(", ".join(requests))
        self.requests = requests


_NO_DEFAULT: Any = object()
# What a valid answer to each input method looks like: the keys it must have.
_ANSWER_KEYS = {"elicitation/create": ("action",), "sampling/createMessage": ("role", "content"),
                "roots/list": ("roots",)}


class Flight:
    """The transport's handle on one request: where its notifications go, and its cancel flag.

    `emit`, and the answer finish() is given, run under the flight's lock, so nothing goes out once it is
    cancelled. A transport whose writes all take one lock may pass it as `lock`: then one round of it both
    settles the request and writes its answer, and `emit` and the answer must not take it again.
    """

    __slots__ = ("_callbacks", "_emit", "_event", "_lock", "cancelled", "done", "heartbeat", "last_progress",
                 "principal", "transport")

    def __init__(self, emit: Optional[Emit] = None, principal: Any = None, transport: str = "",
                 lock: Optional[threading.Lock] = None):
        self._emit = emit
        self.principal = principal  # who the transport authenticated (mcpserver.auth.Principal), if it did
        self.transport = transport  # who made it, when dispatch cannot tell (the test client, mcpserver call)
        self._lock = threading.Lock() if lock is None else lock
        self._callbacks: list[Callable[[], None]] = []
        self.cancelled = False
        self.done = False
        self._event: Optional[threading.Event] = None  # made when a tool first waits on the flight
        self.last_progress: Optional[float] = None  # the tool's own; a heartbeat may have sent more since
        self.heartbeat: Any = None  # the call's Heartbeat (mcpserver._heartbeat), while it has one

    @property
    def streams(self) -> bool:
        """Whether notifications for this request go anywhere (a transport gave the flight its stream)."""
        return self._emit is not None

    @property
    def event(self) -> threading.Event:
        """Set when the request is cancelled: a tool can wait on it instead of sleeping."""
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self.cancelled:
                    self._event.set()
            return self._event

    def send(self, message: dict[str, Any], progress: Optional[float] = None) -> bool:
        """Emit a notification for this request; False (and nothing sent) once it is cancelled or answered,
        or, for progress, when `progress` is not above the last value sent."""
        with self._lock:
            if self.cancelled or self.done or self._emit is None:
                return False
            if progress is not None:
                if self.last_progress is not None and progress <= self.last_progress:
                    return False
                self.last_progress = progress
                if self.heartbeat is not None:  # above any beat sent since, and the beats' new starting point
                    message = self.heartbeat.passing(message)
            self._emit(message)
            return True

    def beat(self) -> Optional[float]:
        """The heartbeat's turn, on the deadline thread: its beat goes out if one is due and the request is
        still on; the seconds until its next turn, or None once the request is over."""
        with self._lock:
            if self.cancelled or self.done or self._emit is None or self.heartbeat is None:
                return None
            beat, wait = self.heartbeat.due()
            if beat is not None:
                self._emit(beat)
            return wait  # type: ignore[no-any-return]

    def finish(self, answer: Optional[Callable[..., Any]] = None, *args: Any) -> bool:
        """The request is answered: run `answer(*args)` (which writes the response) unless it was cancelled."""
        with self._lock:
            if self.cancelled or self.done:
                self.done = True
                return False
            self.done = True
            if answer is not None:
                answer(*args)
            return True

    def cancel(self) -> None:
        """Stop the request: from now on nothing is sent for it, and whoever asked is told."""
        with self._lock:
            if self.cancelled or self.done:
                return
            self.cancelled = True
            callbacks, self._callbacks = self._callbacks, []
            event = self._event
        if event is not None:
            event.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a cancel callback failed")

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the request is cancelled (at once if it already is)."""
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(callback)
                return
        callback()


_PYTHON_LEVELS = ((50, "critical"), (40, "error"), (30, "warning"), (20, "info"), (0, "debug"))


class _LogsToClient:
    """Context.logs_to_client(): one handler on the root logger, installed the first time it is needed,
    forwards a record to the Context current in the thread (a contextvar) that made it."""

    current: Any = None  # contextvars.ContextVar, made with the handler

    def __init__(self, context: Context):
        self.context = context
        self.token: Any = None

    def __enter__(self) -> None:
        if "logging" not in sys.modules:  # the tool does not use logging: nothing to forward
            return
        if _LogsToClient.current is None:
            _LogsToClient._install()
        self.token = _LogsToClient.current.set(self.context)

    def __exit__(self, *exc: Any) -> None:
        if self.token is not None:
            _LogsToClient.current.reset(self.token)

    @staticmethod
    def _install() -> None:
        import contextvars
        import logging

        current: contextvars.ContextVar[Optional[Context]] = contextvars.ContextVar("mcpserver_context", default=None)

        class ToClient(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                context = current.get()
                if context is not None and not record.name.startswith("mcpserver"):
                    level = next(name for floor, name in _PYTHON_LEVELS if record.levelno >= floor)
                    context.log(level, record.getMessage(), logger=record.name)

        with _INSTALL_LOCK:
            if _LogsToClient.current is None:
                logging.getLogger().addHandler(ToClient())
                _LogsToClient.current = current


_INSTALL_LOCK = threading.Lock()
renew_at_fork(sys.modules[__name__], "_INSTALL_LOCK")


class Context:
    """One request in flight, as its tool sees it.

        @server.tool()
        def count(to: int, ctx: Context) -> str:
            for i in range(to):
                ctx.progress(i + 1, to, f"counted {i + 1}")  # raises Cancelled once cancelled
                ctx.sleep(0.1)
            return "done"
    """

    __slots__ = ("_asked", "answers", "flight", "meta", "method", "peer", "request_id", "task")

    def __init__(self, request_id: Any = None, meta: Optional[dict[str, Any]] = None, flight: Optional[Flight] = None,
                 method: str = "tools/call", answers: Optional[dict[str, Any]] = None, peer: Optional[Peer] = None):
        self.request_id = request_id
        self.method = method
        self.meta: dict[str, Any] = meta if meta is not None else {}
        self.flight = flight if flight is not None else Flight()
        self.answers: dict[str, Any] = answers if answers is not None else {}  # the client's, keyed as asked
        self.peer = peer  # a legacy session's client; None in 2026-07-28
        self.task: Any = None  # a task tool's call (mcpserver.tasks._runner._TaskRun); None for a plain call
        self._asked = 0

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared: on this request (2026-07-28, never inferred from earlier ones), or
        when it opened its legacy session."""
        if self.peer is not None:
            return self.peer.session.client_capabilities
        declared = self.meta.get(META_CAPABILITIES)
        return declared if isinstance(declared, dict) else {}

    @property
    def protocol_version(self) -> str:
        """The revision this request is served in: 2026-07-28, or the legacy session's."""
        return str(self.peer.session.revision) if self.peer is not None else PROTOCOL_VERSION

    @property
    def client_info(self) -> Optional[dict[str, Any]]:
        """The client's self-reported name and version; for logs, never for decisions (WIRE.md §3.1)."""
        info = self.meta.get(META_CLIENT_INFO)
        return info if isinstance(info, dict) else None

    @property
    def progress_token(self) -> Any:
        token = self.meta.get(META_PROGRESS_TOKEN)
        return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None

    @property
    def principal(self) -> Any:
        """Who sent the request, when the HTTP transport authenticated it with OAuth: an
        mcpserver.auth.Principal (subject, client_id, scopes, claims); None over stdio, with a static
        token, or without authentication. A tool checks a scope with `ctx.principal.has_scopes("x")`."""
        return self.flight.principal

    @property
    def cancelled(self) -> bool:
        return self.flight.cancelled

    def check_cancelled(self) -> None:
        """Raise Cancelled if the request was cancelled."""
        if self.flight.cancelled:
            raise Cancelled(f"request {self.request_id!r} was cancelled")

    def sleep(self, seconds: float) -> None:
        """Sleep, waking at once (with Cancelled) if the request is cancelled meanwhile."""
        if self.flight.event.wait(seconds):
            self.check_cancelled()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from another thread) when the request is cancelled."""
        self.flight.on_cancel(callback)

    def progress(self, done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Report progress, if the client asked for it; a value not above the last one is not sent."""
        self.check_cancelled()
        token = self.progress_token
        if token is None or isinstance(done, bool) or not isinstance(done, (int, float)):
            return
        params: dict[str, Any] = {"progressToken": token, "progress": done}
        if total is not None:
            params["total"] = total
        if message is not None and self.protocol_version >= "2025-03-26":  # 2024-11-05 has no message
            params["message"] = str(message)
        if self.task is not None:  # a task's progress is its statusMessage (and announces the task)
            self.task.progress(done, total, message)
        self.flight.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}, progress=done)

    def log(self, level: str, data: Any, logger: Optional[str] = None) -> None:
        """A log record about this request: in the server's log always, and to a legacy client as
        notifications/message when `level` ("debug", "info", "notice", "warning", "error", "critical",
        "alert", "emergency") is at or above the level it set. 2026-07-28 has no such notification."""
        tool_log.info("%s%s: %s", f"{logger}: " if logger else "", level, data)
        if self.peer is not None and self.peer.wants_log(level):
            params: dict[str, Any] = {"level": level, "data": data}
            if logger is not None:
                params["logger"] = logger
            self.flight.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    def start_task(self) -> None:
        """In a task tool: answer the request with the task now, and go on as the task (input asked
        before this was asked the MRTR way; after it, through the task). Elsewhere: nothing."""
        if self.task is not None:
            self.task.start()

    def logs_to_client(self) -> _LogsToClient:
        """While the block runs, records of Python's `logging` made in this thread (that pass the logging
        configuration, and are not the server's own) also go to the client as log(): a legacy session's."""
        return _LogsToClient(self)

    # -- input from the client (MRTR, or a legacy session's requests) -----------------------------

    def supports(self, capability: str) -> bool:
        """Whether the client declared `capability` ("elicitation", "sampling", "roots", ...) on this request,
        or when its legacy session was negotiated (only what that revision defines: legacy._shaping.initialize)."""
        return capability in self.client_capabilities

    def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The client's answers to `requests` (key -> a request from mcpserver.inputs), asking if need be.

        In 2026-07-28 the first time ends the request with an input_required result; when the client
        retries with the answers, the tool runs again from the start and this returns them. So code
        before it runs once per round: keep it free of side effects, or make them idempotent. In a
        legacy session each request goes to the client at once, and this waits for the answers.
        """
        from .errors import InvalidParams, MissingClientCapability
        missing = {key: request for key, request in requests.items() if key not in self.answers}
        if missing:
            kinds = dict.fromkeys(CAPABILITY_OF_INPUT.get(r.get("method", ""), "") for r in missing.values())
            lacking: dict[str, Any] = {kind: {} for kind in kinds if kind and not self.supports(kind)}
            if lacking:
                raise MissingClientCapability(f"Missing required client capability: {', '.join(lacking)}",
                                              data={"requiredCapabilities": lacking})
            if self.task is not None and not self.task.keep_as_request():
                self.answers.update(self.task.ask(missing))  # the task's input: tasks/get, tasks/update
            elif self.peer is not None:
                for key, request in missing.items():
                    self.answers[key] = self.peer.request(request["method"], request.get("params", {}), self.flight)
            else:
                raise InputRequired(missing)
        answers = {}
        for key, request in requests.items():
            answer = self.answers[key]
            needed = _ANSWER_KEYS.get(request.get("method", ""), ())
            if not isinstance(answer, dict) or any(k not in answer for k in needed):
                needs = ", ".join(needed) or "an object"
                if self.peer is not None:
                    raise ClientRefused(f"The client's answer to {request.get('method')} is not valid: "
                                        f"it needs {needs}")
                raise InvalidParams(f"Invalid params: inputResponses[{key!r}] is not a valid answer to "
                                    f"{request.get('method')} (it needs {needs})")
            answers[key] = answer
        return answers

    def _ask_one(self, request: dict[str, Any], key: Optional[str], default: Any) -> dict[str, Any]:
        self._asked += 1
        key = key if key is not None else f"input-{self._asked}"
        if default is not _NO_DEFAULT and not self.supports(CAPABILITY_OF_INPUT[request["method"]]):
            return default  # type: ignore[no-any-return]
        answer: dict[str, Any] = self.ask({key: request})[key]
        return answer

    def elicit(self, message: str, schema: Optional[dict[str, Any]] = None, *, key: Optional[str] = None,
               default: Any = _NO_DEFAULT) -> dict[str, Any]:
        """Ask the user to fill a form; the ElicitResult ({"action": "accept", "content": {...}}, or
        "decline" / "cancel"). Without elicitation support: `default` if given, else -32021."""
        from .inputs import elicit

        return self._ask_one(elicit(message, schema), key, default)

    def sample(self, messages: Any, max_tokens: int, *, key: Optional[str] = None, default: Any = _NO_DEFAULT,
               **params: Any) -> dict[str, Any]:
        """Ask the client's model; the CreateMessageResult ({"role", "content", "model", ...})."""
        from .inputs import sample

        return self._ask_one(sample(messages, max_tokens, **params), key, default)

    def roots(self, *, key: Optional[str] = None, default: Any = _NO_DEFAULT) -> list[dict[str, Any]]:
        """The client's roots ([{"uri": "file:///...", "name": ...}, ...])."""
        from .inputs import roots

        answer = self._ask_one(roots(), key, default)
        return answer.get("roots", []) if isinstance(answer, dict) else answer  # type: ignore[no-any-return]
