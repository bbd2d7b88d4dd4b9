"""A server whose code configures OpenTelemetry's SDK, as a deployment would, with the SDK's in-memory exporter: the
`spans` tool reads back what was recorded, so a test sees a real server process's spans (tests/unit/test_tracing.py).
`loaded` says which opentelemetry modules the process has imported (for a server that does not use them, none)."""

import logging
import sys

from mcpserver import Context, Server
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("traced_tools")

server = Server("traced", "1.0.0")


def described(span):
    parent = span.parent
    return {"name": span.name, "trace_id": format(span.context.trace_id, "032x"),
            "span_id": format(span.context.span_id, "016x"),
            "parent_id": format(parent.span_id, "016x") if parent is not None else None,
            "kind": span.kind.name, "status": span.status.status_code.name, "attributes": dict(span.attributes),
            "tracestate": span.context.trace_state.to_header()}


@server.tool()
def work(steps: int = 1) -> str:
    """Opens a span of its own per step: the request's span is its parent."""
    for step in range(steps):
        with tracer.start_as_current_span(f"step {step}"):
            pass
    return "worked"


@server.tool(task="optional")
def background(ctx: Context) -> str:
    """A task tool: its thread opens a span too."""
    ctx.start_task()
    with tracer.start_as_current_span("in the task"):
        return "done"


@server.tool()
def spans() -> dict:
    """Every span finished so far."""
    return {"spans": [described(span) for span in exporter.get_finished_spans()]}


@server.tool()
def loaded() -> dict:
    return {"loaded": sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")}


@server.tool()
def noisy() -> str:
    """Logs through the standard logging module, as tool code does."""
    logging.getLogger("traced_tools").warning("noisy was called")
    return "said so"
