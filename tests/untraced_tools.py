"""A server that does not use OpenTelemetry (installed or not): `loaded` says which of its modules the process
has imported, which must be none (tests/unit/test_tracing.py)."""

import sys

from mcpserver import Server

server = Server("untraced", "1.0.0")


@server.tool()
def loaded() -> dict:
    return {"loaded": sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")}
