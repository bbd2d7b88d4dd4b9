"""A seam around every request, in both eras and on both transports (docs/adr/0017-middleware.md).

    @server.middleware
    def audit(call, proceed):
        result = proceed()
        log.info("%s %s by %s in %.1f ms", call.method, call.name, call.principal, call.elapsed() * 1000)
        return result

Rules of this module:
- A middleware is a callable `(call, proceed) -> result`. `proceed()` runs the rest of the chain and the
  method's handler and returns its result (a dict); the middleware returns what to answer with, normally
  that. The first registered runs outermost: it sees a request first and its result last.
- It runs once the request is known to be well formed and served (2026-07-28: after the envelope, header,
  _meta, version and method checks; a legacy session: after initialize), for every method, task tools'
  calls and the tasks/* methods included. initialize and ping of a legacy session are not requests of the
  server's and do not pass through it.
- Refusing: raise a ProtocolError (mcpserver.errors) before, or instead of, calling proceed(): the client
  gets that error, in its era's codes. The handler's own ProtocolError (an unknown tool, bad params) comes
  out of proceed() and may be caught or let through.
- Adding to the answer: `call.add_meta(key, value)` puts a key in the result's `_meta`.
- A middleware sees plain data, never a socket, a stream or the transport's objects (over HTTP, a 2026-07-28
  request's header fields, read-only). What it raises other
  than a ProtocolError is the server's own bug: logged with its traceback, answered -32603, and the server
  serves on. Cancelled and InputRequired are how a call ends early (cancelled, input_required): they pass
  through a middleware as they do through the handler; one that catches BaseException must let them go.
- Free when unused: without middleware, dispatch reads one attribute per request and builds no Call.
"""

from __future__ import annotations

import sys

from ._context import NAMED_BY, Call
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    Proceed = Callable[[], Any]
    Handler = Callable[[Any, dict[str, Any], Any], Any]
    MiddlewareFunction = Callable[[Call, Proceed], Any]

__all__ = ["NAMED_BY", "Call", "Middleware", "MiddlewareChain", "transport_of"]

def transport_of(headers: Optional[dict[str, str]], flight: Any, peer: Any) -> str:
    """Which transport a request came by, from what dispatch is given: headers only over HTTP; else what the
    flight or the legacy session's peer says (the test client and `mcpserver call` name themselves); stdio."""
    if headers is not None:
        return "http"
    named = flight.transport if flight is not None else ""
    if named:
        return str(named)
    return str(getattr(peer, "transport", "stdio")) if peer is not None else "stdio"


class Middleware:
    """A middleware of three hooks, for those who prefer them to `(call, proceed)`: `before(call)` (raise a
    ProtocolError to refuse), `after(call, result)` (return a result to answer with instead, or None to keep
    it), `error(call, exception)` (the handler or a later middleware raised; it is raised on after)."""

    def before(self, call: Call) -> None:
        pass

    def after(self, call: Call, result: Any) -> Any:
        return None

    def error(self, call: Call, exception: Exception) -> None:
        pass

    def __call__(self, call: Call, proceed: Proceed) -> Any:
        self.before(call)
        try:
            result = proceed()
        except Exception as exception:
            self.error(call, exception)
            raise
        replaced = self.after(call, result)
        return result if replaced is None else replaced


class MiddlewareChain:
    """A server's middleware, in order: `server.middleware(fn)` adds one (and returns it: a decorator too)."""

    def __init__(self) -> None:
        self._middleware: tuple[MiddlewareFunction, ...] = ()
        self.run: Optional[Callable[[Call, Handler, Any, dict[str, Any], Any], Any]] = None  # None: none

    def __call__(self, middleware: MiddlewareFunction, *, outermost: bool = False) -> MiddlewareFunction:
        """Add `middleware` inside those added before, or, `outermost`, around all of them (the server's own
        metrics and traces: they count and time what the server's middleware refuses too)."""
        if not callable(middleware):
            raise ConfigError(f"a middleware is a callable (call, proceed) -> result, not {middleware!r}")
        self._middleware = (middleware, *self._middleware) if outermost else (*self._middleware, middleware)
        self.run = self._run
        return middleware

    def __len__(self) -> int:
        return len(self._middleware)

    def __contains__(self, middleware: object) -> bool:
        return middleware in self._middleware

    def trace_if_configured(self, http_network: str = "tcp") -> None:
        """Trace every request (mcpserver._tracing), once, if the server's code has imported OpenTelemetry: a
        server that does not use it imports nothing of it. Whoever serves calls this (stdio, the app, the client);
        `http_network` is how its HTTP requests come: "tcp", or "unix" for an app on a Unix socket."""
        if "opentelemetry.trace" in sys.modules:
            from ._tracing import traced_over

            if not any(hasattr(middleware, "http_network") for middleware in self._middleware):
                self(traced_over(http_network), outermost=True)

    def _run(self, call: Call, handler: Handler, server: Any, params: dict[str, Any], context: Any) -> Any:
        """The handler, through every middleware, outermost first; the call's _meta added to a dict result."""
        chain = self._middleware

        def step(index: int) -> Any:
            if index == len(chain):
                return handler(server, params, context)
            return chain[index](call, lambda: step(index + 1))

        result = step(0)
        if call._meta and isinstance(result, dict):
            result["_meta"] = {**result.get("_meta", {}), **call._meta}
        return result
