"""Errors: the JSON-RPC ones a request can end in, and the one that refuses to start a server.

Internal code raises a `ProtocolError` subclass; only `protocol.dispatch` turns it into an error
response. Each class carries its JSON-RPC code and the HTTP status the Streamable HTTP binding
must answer with (WIRE.md §7.2, §16.9), so the transport holds no table of its own.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = [
    "RESOURCE_NOT_FOUND",
    "ConfigError",
    "HeaderMismatch",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "MethodNotFound",
    "MissingClientCapability",
    "ParseError",
    "ProtocolError",
    "ResourceMissing",
    "UnsupportedVersion",
]


class ProtocolError(Exception):
    """A request that ends in a JSON-RPC error response."""

    code: int = -32603
    http_status: int = 500

    def __init__(self, message: str, data: Optional[Any] = None, *, http_status: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.data = data
        if http_status is not None:
            self.http_status = http_status

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(ProtocolError):
    """Bytes that are not one JSON value, or JSON nested deeper than the limit: -32700 (HTTP 400)."""

    code = -32700
    http_status = 400


class InvalidRequest(ProtocolError):
    """JSON that is not a JSON-RPC request the server can read (no method, a bad id, a batch): -32600 (HTTP 400)."""

    code = -32600
    http_status = 400


class MethodNotFound(ProtocolError):
    """A method the server does not serve, or whose capability it did not declare: -32601 (HTTP 404)."""

    code = -32601
    http_status = 404


class InvalidParams(ProtocolError):
    """Bad method params (200 on HTTP); a missing required `_meta` field passes http_status=400."""

    code = -32602
    http_status = 200


RESOURCE_NOT_FOUND = -32002  # what the legacy revisions call a missing resource (2026-07-28: -32602)


class ResourceMissing(InvalidParams):
    """resources/read of a URI nothing serves: -32602 in 2026-07-28, -32002 in a legacy session."""


class InternalError(ProtocolError):
    """The server failed while answering: -32603 (HTTP 500). Its message says what failed, never how."""

    code = -32603
    http_status = 500


class HeaderMismatch(ProtocolError):
    """An HTTP header that disagrees with the body, or a missing MCP header (2026-07-28): -32020 (HTTP 400)."""

    code = -32020
    http_status = 400


class MissingClientCapability(ProtocolError):
    """A request that needs a capability the client did not declare (elicitation, sampling, roots, an extension):
    -32021 (HTTP 400)."""

    code = -32021
    http_status = 400


class UnsupportedVersion(ProtocolError):
    """A protocol revision the server does not serve: -32022 (HTTP 400), `supported` and `requested` in its data."""

    code = -32022
    http_status = 400


class ConfigError(Exception):
    """Something a server advertises cannot work; the server refuses to start.

    The message is one line that names the offending tool, file or option.
    """
