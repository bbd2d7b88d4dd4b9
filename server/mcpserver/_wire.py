"""The wire's names, spelled once: `_meta` keys, HTTP header names, capability keys, status lines.

The ground floor: the core, the request context, the transports and the command line import these
instead of writing the strings again, so a name cannot drift between them.
"""

from __future__ import annotations

PROTOCOL_VERSION = "2026-07-28"  # the revision of the modern, stateless era, which every result names
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)  # the modern era's
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # by initialize (LEGACY.md), newest first

# params._meta keys (WIRE.md §3)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META_PROGRESS_TOKEN = "progressToken"

# Streamable HTTP headers (WIRE.md §16)
HEADER_VERSION = "MCP-Protocol-Version"
HEADER_METHOD = "Mcp-Method"
HEADER_NAME = "Mcp-Name"
HEADER_PARAM_PREFIX = "Mcp-Param-"
HEADER_SESSION = "Mcp-Session-Id"  # a legacy session's (LEGACY.md §4.3); header names are case-insensitive
# RFC 9110 §5.6.2: what a header name (and an HTTP method) may be made of.
HEADER_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"

# Extensions (the capability key a client declares in clientCapabilities.extensions, per request).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"  # SEP-2640: skills/list, skills/get, resources/directory/read
APPS_EXTENSION = "io.modelcontextprotocol/ui"  # SEP-1865, MCP Apps: ui:// resources tools link to

# Client capabilities a server may ask for input through (WIRE.md §14.2).
CAPABILITY_OF_INPUT = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling",
                       "roots/list": "roots"}
# What a one-shot client (mcpserver call) declares: every kind of input, so a tool that asks says so.
ALL_INPUT_CAPABILITIES: dict[str, dict[str, object]] = {"elicitation": {}, "sampling": {}, "roots": {}}

# The one table of HTTP status lines the server and the app write.
STATUS_REASONS = {100: "Continue", 200: "OK", 202: "Accepted", 204: "No Content", 304: "Not Modified",
                  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                  405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout", 411: "Length Required",
                  413: "Content Too Large", 415: "Unsupported Media Type", 429: "Too Many Requests",
                  431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
                  503: "Service Unavailable", 505: "HTTP Version Not Supported"}

# How long either transport lets requests in flight finish after SIGTERM/SIGINT.
DEFAULT_GRACE_SECONDS = 10.0


def status_line(status: int) -> str:
    """"404 Not Found" for 404."""
    return f"{status} {STATUS_REASONS.get(status, 'Status')}"
