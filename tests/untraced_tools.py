"""A server that uses neither OpenTelemetry (installed or not) nor `logging`: `loaded` says which of their modules
the process has imported, which must be none (tests/unit/test_tracing.py, test_json_logs.py); `fails` raises, so
the server logs."""

import sys

from mcpserver import Server

server = Server("untraced", "1.0.0")


@server.tool()
def loaded() -> dict:
    return {"loaded": sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry"),
            "logging": "logging" in sys.modules}


@server.tool()
def fails() -> str:
    raise ValueError("as planned")
