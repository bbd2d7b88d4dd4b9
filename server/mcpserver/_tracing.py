"""OpenTelemetry traces: every request a span, when the server's code has configured OpenTelemetry.

    pip install 'mcpserver[otel]' opentelemetry-sdk     # or run under opentelemetry-instrument

The one module that imports opentelemetry, and only once it is in use. Rules of this module:
- Adopted, never sought: whoever serves (stdio, the HTTP app, the test client) looks for `opentelemetry.trace` in
  sys.modules (MiddlewareChain.trace_if_configured), and only if the server's code (or opentelemetry-instrument's
  start-up) imported it is this module imported and its middleware added, outermost. A server that does not use
  OpenTelemetry imports nothing of it and pays one dictionary lookup at start-up. Import OpenTelemetry before
  serving; the TracerProvider may be set later (the tracer taken here is OpenTelemetry's proxy until then).
- A span per request the server answers with its own code (a middleware: what the core refuses before any
  handler has none), of kind SERVER, named by method and what it names, "tools/call greet", with the
  attributes of OpenTelemetry's MCP conventions (mcpserver._semconv: mcp.method.name, mcp.protocol.version,
  jsonrpc.request.id, gen_ai.tool.name and gen_ai.operation.name, gen_ai.prompt.name, mcp.resource.uri,
  network.transport: unix for an HTTP app on a Unix socket). A JSON-RPC error or a tool's isError result sets
  the status to ERROR with error.type (the code, or tool_error) and rpc.response.status_code (the code).
- It continues the caller's trace: from `_meta`'s `traceparent` (and `tracestate`, `baggage`: SEP-414, as the
  MCP SDKs send it, in both eras and on every transport), else from the HTTP request's `traceparent` header
  (a 2026-07-28 request's: Call.headers), through the globally configured propagator; else it starts a trace.
- The span is current in the thread that runs the handler, so tool code's own spans are its children; a task
  tool's thread starts with the request's context (tasks._runner copies it).
"""

from __future__ import annotations

from ._context import Cancelled
from ._semconv import EXECUTE_TOOL, NAMED_AS, network_of, outcome_attributes
from ._version import __version__
from .errors import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ._context import Call

__all__ = ["traced", "traced_over"]

CARRIED = ("traceparent", "tracestate", "baggage")  # SEP-414: W3C Trace Context and Baggage, un-prefixed in _meta


class _OpenTelemetry:
    """What the middleware uses, imported at the first request (adopt has already seen opentelemetry loaded)."""

    def __init__(self) -> None:
        from opentelemetry import propagate, trace

        self.extract = propagate.extract
        self.tracer = trace.get_tracer("mcpserver", __version__)
        self.server_kind = trace.SpanKind.SERVER
        self.error = trace.Status(trace.StatusCode.ERROR)


_OTEL: Any = None


def _carrier(call: Call) -> dict[str, str]:
    """The caller's trace context: _meta's (SEP-414) first, else the HTTP request's headers."""
    meta = call.params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
        return {key: meta[key] for key in CARRIED if isinstance(meta.get(key), str)}
    headers = call.headers
    if headers is not None and headers.get("traceparent"):
        return {key: headers[key] for key in CARRIED if headers.get(key)}
    return {}


_OVER: dict[str, Callable[[Call, Callable[[], Any]], Any]] = {}


def traced_over(http_network: str) -> Callable[[Call, Callable[[], Any]], Any]:
    """The middleware of a server whose HTTP requests come over `http_network`: "tcp", or "unix" for an app on a
    Unix socket. One function per network, so a chain can tell it holds one (its `http_network`)."""
    found = _OVER.get(http_network)
    if found is None:
        def traced_here(call: Call, proceed: Callable[[], Any]) -> Any:
            return _traced(call, proceed, http_network)

        traced_here.http_network = http_network  # type: ignore[attr-defined]
        found = _OVER[http_network] = traced_here
    return found


def traced(call: Call, proceed: Callable[[], Any]) -> Any:
    """The middleware: the request as a span, current while the rest of the chain and the handler run."""
    return _traced(call, proceed, "tcp")


traced.http_network = "tcp"  # type: ignore[attr-defined]
_OVER["tcp"] = traced


def _traced(call: Call, proceed: Callable[[], Any], http_network: str) -> Any:
    global _OTEL
    otel = _OTEL or _OpenTelemetry()
    _OTEL = otel
    carrier = _carrier(call)
    attributes: dict[str, Any] = {"mcp.method.name": call.method, "mcp.protocol.version": call.era,
                                  "network.transport": network_of(call.transport, http_network)}
    if call.request_id is not None:
        attributes["jsonrpc.request.id"] = str(call.request_id)
    if call.name is not None and call.method in NAMED_AS:
        attributes[NAMED_AS[call.method]] = call.name
    if call.method == "tools/call":
        attributes["gen_ai.operation.name"] = EXECUTE_TOOL
    name = f"{call.method} {call.name}" if call.name else call.method
    with otel.tracer.start_as_current_span(name, context=otel.extract(carrier) if carrier else None,
                                           kind=otel.server_kind, attributes=attributes, record_exception=False,
                                           set_status_on_exception=False) as span:
        try:
            result = proceed()
        except ProtocolError as refused:
            span.set_attributes(outcome_attributes(refused.code))
            span.set_status(otel.error)
            raise
        except Cancelled:
            span.set_attributes(outcome_attributes(cancelled=True))
            raise
        except Exception as bug:  # the server's own (answered -32603): the span says which
            span.record_exception(bug)
            span.set_attributes({**outcome_attributes(-32603), "error.type": type(bug).__qualname__})
            span.set_status(otel.error)
            raise
        failed = outcome_attributes(result=result)
        if failed:
            span.set_attributes(failed)
            span.set_status(otel.error)
        return result
