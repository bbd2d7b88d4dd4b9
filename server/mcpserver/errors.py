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
    code = -32700
    http_status = 400


class InvalidRequest(ProtocolError):
    code = -32600
    http_status = 400


class MethodNotFound(ProtocolError):
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
    code = -32603
    http_status = 500


class HeaderMismatch(ProtocolError):
    code = -32020
    http_status = 400


class MissingClientCapability(ProtocolError):
    code = -32021
    http_status = 400


class UnsupportedVersion(ProtocolError):
    code = -32022
    http_status = 400


class ConfigError(Exception):
    """Something a server advertises cannot work; the server refuses to start.

    The message is one line that names the offending tool, file or option.
    """
