"""OpenTelemetry's semantic conventions for MCP, as the spans (mcpserver._tracing) and the metrics
(mcpserver.http._metrics) spell them: the attributes a request gives, and the buckets of its duration.

Read from open-telemetry/semantic-conventions v1.41.1, docs/gen-ai/mcp.md and model/mcp/*.yaml (the last release
that holds them; they live on in open-telemetry/semantic-conventions-genai, model/mcp/, which names the same
attributes and buckets). Rules of this module:
- Every request: mcp.method.name, mcp.protocol.version (the revision it is served in) and network.transport: pipe
  over stdio, tcp over HTTP, unix over HTTP on a Unix socket, inproc (a value of ours, as the conventions allow)
  for the in-process client and `mcpserver call`.
- tools/call: gen_ai.tool.name, and gen_ai.operation.name = execute_tool; prompts/get: gen_ai.prompt.name; the
  resources/* methods: mcp.resource.uri (a span's only: a URI would make a metric's series unbounded).
- A JSON-RPC error: error.type and rpc.response.status_code are its code ("-32602"); a tool's isError result:
  error.type tool_error; a cancelled request: error.type cancelled. A success has neither.
- mcp.server.operation.duration is a histogram in seconds with OPERATION_BUCKETS.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["EXECUTE_TOOL", "NAMED_AS", "NETWORK", "OPERATION_BUCKETS", "outcome_attributes"]

# What each method names, as the conventions spell it.
NAMED_AS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name",
            "resources/read": "mcp.resource.uri", "resources/subscribe": "mcp.resource.uri",
            "resources/unsubscribe": "mcp.resource.uri"}
EXECUTE_TOOL = "execute_tool"  # gen_ai.operation.name of a tools/call
# network.transport by Call.transport; "http" is "unix" for an app on a Unix socket (network_of)
NETWORK = {"stdio": "pipe", "http": "tcp"}
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def network_of(transport: str, http_network: str = "tcp") -> str:
    """network.transport for a request that came by `transport` (Call.transport), HTTP's being `http_network`."""
    return http_network if transport == "http" else NETWORK.get(transport, "inproc")


def outcome_attributes(code: Optional[int] = None, result: Any = None, cancelled: bool = False) -> dict[str, str]:
    """error.type and rpc.response.status_code of an answer: its JSON-RPC error `code`, or a tool's isError
    `result`, or a cancel; empty for a success."""
    if code is not None:
        return {"error.type": str(code), "rpc.response.status_code": str(code)}
    if cancelled:
        return {"error.type": "cancelled"}
    if isinstance(result, dict) and result.get("isError") is True:
        return {"error.type": "tool_error"}
    return {}
