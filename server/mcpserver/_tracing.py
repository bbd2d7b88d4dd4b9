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
  attributes of OpenTelemetry's MCP conventions (mcp.method.name, mcp.protocol.version, jsonrpc.request.id,
  gen_ai.tool.name, gen_ai.prompt.name, mcp.resource.uri, network.transport). A JSON-RPC error or a tool's
  isError result sets the status to ERROR with error.type (the code, or tool_error).
- It continues the caller's trace: from `_meta`'s `traceparent` (and `tracestate`, `baggage`: SEP-414, as the
  MCP SDKs send it, in both eras and on every transport), else from the HTTP request's `traceparent` header
  (a 2026-07-28 request's: Call.headers), through the globally configured propagator; else it starts a trace.
- The span is current in the thread that runs the handler, so tool code's own spans are its children; a task
  tool's thread starts with the request's context (tasks._runner copies it).
"""

from __future__ import annotations

from ._context import Cancelled
from ._version import __version__
from .errors import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ._context import Call

__all__ = ["traced"]

CARRIED = ("traceparent", "tracestate", "baggage")  # SEP-414: W3C Trace Context and Baggage, un-prefixed in _meta
# What each method names, as OpenTelemetry's MCP conventions spell it.
_NAMED_AS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name",
             "resources/read": "mcp.resource.uri", "resources/subscribe": "mcp.resource.uri",
             "resources/unsubscribe": "mcp.resource.uri"}

_NETWORK = {"stdio": "pipe", "http": "tcp"}  # else in-process (the test client, mcpserver call)


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


def traced(call: Call, proceed: Callable[[], Any]) -> Any:
    """The middleware: the request as a span, current while the rest of the chain and the handler run."""
    global _OTEL
    otel = _OTEL or _OpenTelemetry()
    _OTEL = otel
    carrier = _carrier(call)
    attributes: dict[str, Any] = {"mcp.method.name": call.method, "mcp.protocol.version": call.era,
                                  "network.transport": _NETWORK.get(call.transport, "inproc")}
    if call.request_id is not None:
        attributes["jsonrpc.request.id"] = str(call.request_id)
    if call.name is not None and call.method in _NAMED_AS:
        attributes[_NAMED_AS[call.method]] = call.name
    name = f"{call.method} {call.name}" if call.name else call.method
    with otel.tracer.start_as_current_span(name, context=otel.extract(carrier) if carrier else None,
                                           kind=otel.server_kind, attributes=attributes, record_exception=False,
                                           set_status_on_exception=False) as span:
        try:
            result = proceed()
        except ProtocolError as refused:
            span.set_attribute("error.type", str(refused.code))
            span.set_status(otel.error)
            raise
        except Cancelled:
            span.set_attribute("error.type", "cancelled")
            raise
        except Exception as bug:  # the server's own (answered -32603): the span says which
            span.record_exception(bug)
            span.set_attribute("error.type", type(bug).__qualname__)
            span.set_status(otel.error)
            raise
        if isinstance(result, dict) and result.get("isError") is True:
            span.set_attribute("error.type", "tool_error")
            span.set_status(otel.error)
        return result
