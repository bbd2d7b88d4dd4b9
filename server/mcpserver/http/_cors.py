"""CORS for browser clients on the MCP endpoint: the Fetch standard's protocol, for the origins named by
--allow-origin (`create_app(allowed_origins=...)`) and no others.

Rules of this module:
- Only a named origin gets CORS headers. A loopback origin that is merely let through by default (the Origin
  check's rule when bound to loopback) gets none, so a browser lets no page read an answer it was not named for;
  an origin that is not allowed at all is refused (403) before any of this, its preflight included.
- A preflight (OPTIONS with Access-Control-Request-Method) is answered before authentication, as Fetch sends
  it without credentials: 204 with the methods (POST, and a legacy session's GET and DELETE), the request
  headers asked for that MCP defines (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id,
  Last-Event-ID, Authorization, Content-Type, Accept, and any Mcp-Param-* a tool declares), and a max age.
  A header asked for that MCP does not define is left out, and the browser then refuses the request itself.
- Every answer to a named origin, refusals included (401, 429), says which origin may read it, with
  credentials, and exposes the headers a client acts on: Mcp-Session-Id, WWW-Authenticate, Retry-After,
  MCP-Protocol-Version. `Vary: Origin` keeps a cache from serving one origin's answer to another.
- Free when unused: with no origin named the app holds no Cors and adds nothing per request.
"""

from __future__ import annotations

from .._wire import HEADER_PARAM_PREFIX
from ._response import Response

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from ._response import StartResponse

__all__ = ["Cors"]

ALLOWED_METHODS = "POST, GET, DELETE"
# Request headers a browser client of MCP sends that Fetch does not safelist (lower case, as preflights list them).
ALLOWED_HEADERS = frozenset({"content-type", "accept", "authorization", "mcp-protocol-version", "mcp-method",
                             "mcp-name", "mcp-session-id", "last-event-id"})
EXPOSED_HEADERS = "Mcp-Session-Id, WWW-Authenticate, Retry-After, MCP-Protocol-Version"
MAX_AGE_SECONDS = "600"  # how long a browser may reuse a preflight (Chromium caps it at 7,200)
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")  # RFC 9110 token characters


def _allowed_header(name: str) -> bool:
    param = HEADER_PARAM_PREFIX.lower()
    return name in ALLOWED_HEADERS or (name.startswith(param) and len(name) > len(param) and set(name) <= _TOKEN)


class Cors:
    """The named origins of one endpoint, and the CORS headers their requests get."""

    def __init__(self, origins: Iterable[str], path: str):
        self.origins = frozenset(origins)
        self.path = path

    def _named(self, environ: dict[str, Any]) -> str:
        """The request's Origin when it is named and the request is for the endpoint, else ""."""
        origin = environ.get("HTTP_ORIGIN", "")
        return origin if origin.rstrip("/") in self.origins and environ.get("PATH_INFO") == self.path else ""

    def headers(self, environ: dict[str, Any]) -> list[tuple[str, str]]:
        """What an answer to this request adds: nothing unless its origin is named."""
        origin = self._named(environ)
        if not origin:
            return []
        return [("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Credentials", "true"),
                ("Access-Control-Expose-Headers", EXPOSED_HEADERS), ("Vary", "Origin")]

    def preflight(self, environ: dict[str, Any]) -> Any:
        """The answer to a named origin's preflight (the CORS headers are added with every answer's), else None."""
        if environ.get("REQUEST_METHOD") != "OPTIONS" or "HTTP_ACCESS_CONTROL_REQUEST_METHOD" not in environ \
                or not self._named(environ):
            return None
        asked = (name.strip().lower() for name in environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "").split(","))
        granted = ", ".join(name for name in asked if name and _allowed_header(name))
        return Response(204, [("Access-Control-Allow-Methods", ALLOWED_METHODS),
                              ("Access-Control-Allow-Headers", granted),
                              ("Access-Control-Max-Age", MAX_AGE_SECONDS), ("Content-Length", "0")])

    def wrap(self, environ: dict[str, Any], start_response: StartResponse) -> StartResponse:
        """`start_response`, adding this request's CORS headers to whatever is answered."""
        added = self.headers(environ)
        if not added:
            return start_response

        def with_cors(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(status, [*headers, *added], *exc_info)

        return with_cors
