"""What the MCP app answers with over HTTP: a whole Response, or a Refused one that ends a request early; and what
the checks on a request's head learned of one they let through (Admitted).

A Reply from the core becomes JSON with the status its error carries; a notification, or a request whose client
went away, is 202 with no body. What a client sent is escaped (`printable`) before it reaches a log line.
"""

from __future__ import annotations

from .. import protocol
from .._wire import status_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional

    StartResponse = Callable[..., Any]
    Logged = Callable[[str], None]

__all__ = ["Admitted", "Refused", "Response", "json_parts", "printable", "refused"]


def printable(text: Any) -> str:
    """What a client sent, safe to put in one log line: control characters and quotes escaped."""
    return repr(str(text))[1:-1]


class Response:
    """One whole HTTP answer: a status code, header fields and a body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes = b""):
        self.status = status
        self.headers = headers
        self.body = body

    @classmethod
    def plain(cls, status: int, message: str, *extra: tuple[str, str]) -> Response:
        data = (message + "\n").encode()
        return cls(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data))),
                            *extra], data)

    @classmethod
    def json(cls, reply: Optional[protocol.Reply]) -> Response:
        """A reply as HTTP: its response as JSON with the status the error carries; 202 with no body for a
        notification (None), and for a request cancelled because its client went away (no one reads it)."""
        if reply is None or reply.response is None:
            return cls(202, [("Content-Type", "text/plain"), ("Content-Length", "0")])
        data = protocol.encode(reply.response)
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                   ("Cache-Control", "no-store")]
        if reply.http_status == 429:  # a rate limit (mcpserver._ratelimit): when to try again, as HTTP says it
            error = reply.response.get("error") or {}
            headers.append(("Retry-After", str((error.get("data") or {}).get("retryAfterSeconds", 1))))
        return cls(reply.http_status, headers, data)

    def wsgi(self) -> tuple[str, list[tuple[str, str]], bytes]:
        """(status line, headers, body): what screen() returns to refuse."""
        return status_line(self.status), self.headers, self.body

    def send(self, start_response: StartResponse, logged: Logged) -> Iterable[bytes]:
        status = status_line(self.status)
        start_response(status, self.headers)
        logged(status)
        return [self.body] if self.body else []


class Refused(Exception):
    """The request ends here, answered with `response`, before any of its body is read."""

    def __init__(self, response: Response):
        super().__init__(response.status)
        self.response = response


def refused(status: int, message: str, *extra: tuple[str, str]) -> Refused:
    return Refused(Response.plain(status, message, *extra))


def json_parts(reply: protocol.Reply) -> tuple[list[tuple[str, str]], bytes]:
    data = protocol.encode(reply.response or {})
    return [("Content-Type", "application/json"), ("Content-Length", str(len(data)))], data


class Admitted:
    """What the checks on a request's head learned: who it is, what it accepts, how long its body is."""

    __slots__ = ("accepted", "length", "principal", "principal_key")

    def __init__(self, accepted: frozenset[str], length: int, principal: Any, principal_key: Optional[str]):
        self.accepted = accepted
        self.length = length
        self.principal = principal
        self.principal_key = principal_key
