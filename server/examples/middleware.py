"""Middleware: three real uses, around every request of both eras and both transports.

    python -m mcpserver server/examples/middleware.py
    python -m mcpserver --http server/examples/middleware.py

- An audit log: one line per request, with who asked for what and how it ended.
- A per-tenant allow-list: a principal's tenant (an OAuth claim) may call only its tools, and lists only them.
- Timing: each result says how long the server took, in its `_meta`.
"""

import logging

from mcpserver import Server
from mcpserver.errors import InvalidParams, ProtocolError

server = Server("middleware", "1.0.0")
audit_log = logging.getLogger("audit")

# tenant -> the tools it may use; a principal without a tenant claim (or no OAuth at all) may use every tool
ALLOWED = {"acme": {"echo", "add"}, "globex": {"echo"}}


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shutdown_reactor() -> str:
    """A tool no tenant should see."""
    return "shut down"


@server.middleware
def audit(call, proceed):
    """Outermost: it sees every request first and every outcome last, refusals by later middleware included."""
    who = call.principal.subject if call.principal is not None else "-"
    try:
        result = proceed()
    except ProtocolError as refused:
        audit_log.info("%s %s %s by %s over %s: refused %d", call.era, call.method, call.name or "", who,
                       call.transport, refused.code)
        raise
    failed = isinstance(result, dict) and result.get("isError")
    audit_log.info("%s %s %s by %s over %s: %s", call.era, call.method, call.name or "", who, call.transport,
                   "tool error" if failed else "ok")
    return result


def tenant_of(call):
    claims = call.principal.claims if call.principal is not None else {}
    return claims.get("tenant")


@server.middleware
def tenant_allow_list(call, proceed):
    allowed = ALLOWED.get(tenant_of(call))
    if allowed is None:
        return proceed()
    if call.method == "tools/call" and call.name not in allowed:
        raise InvalidParams(f"Unknown tool: {call.name}")  # what an unknown tool gets: existence does not leak
    result = proceed()
    if call.method == "tools/list":
        result["tools"] = [tool for tool in result["tools"] if tool["name"] in allowed]
    return result


@server.middleware
def timing(call, proceed):
    result = proceed()
    call.add_meta("io.example/elapsedMs", round(call.elapsed() * 1000, 3))
    return result
