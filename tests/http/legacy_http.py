"""A raw legacy-era client over Streamable HTTP, for tests that must see the wire as it is: a session
(initialize, initialized), POSTs in it, and SSE streams read event by event, with their ids.

It knows nothing the tests do not spell out: no reconnection of its own, so each test drops and resumes a
stream exactly where it means to.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class Event:
    """One SSE event: its id, type and data (the JSON message, or None for an event without data)."""

    def __init__(self, fields: dict[str, str]):
        self.id = fields.get("id")
        self.type = fields.get("event", "message")
        self.retry = int(fields["retry"]) if "retry" in fields else None
        raw = fields.get("data", "")
        self.message: Any = json.loads(raw) if raw else None

    @property
    def method(self) -> Optional[str]:
        return self.message.get("method") if isinstance(self.message, dict) else None

    def __repr__(self) -> str:
        return f"Event(id={self.id!r}, type={self.type!r}, message={self.message!r})"


def parse_events(raw: bytes) -> list[Event]:
    """The events of a whole SSE body."""
    events, fields = [], {}
    for line in raw.decode("utf-8").split("\n"):
        line = line.rstrip("\r")
        if not line:
            if fields:
                events.append(Event(fields))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
    return events


class SseStream:
    """An SSE response read event by event; `closed` once the server ended it."""

    def __init__(self, connection: Any, response: Any):
        self.connection = connection
        self.response = response
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.getheaders()}
        self.closed = False

    def events(self) -> Iterator[Event]:
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline()
            if not line:
                self.closed = True
                return
            text = line.decode("utf-8").rstrip("\r\n")
            if not text:
                if fields:
                    yield Event(fields)
                fields = {}
                continue
            if text.startswith(":"):
                continue
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value

    def next(self, method: Optional[str] = None, skip_priming: bool = True) -> Event:
        """The next event (of `method`, when given: others are skipped; so is an id-only priming event unless
        asked for); AssertionError when none comes within the connection's timeout (keep-alives do not count)."""
        import time

        deadline = time.monotonic() + (self.connection.timeout or 10)
        try:
            for event in self.events():
                if (event.message is None and skip_priming) or (method is not None and event.method != method):
                    continue
                return event
        except TimeoutError:
            pass
        if time.monotonic() >= deadline or not self.closed:
            raise AssertionError(f"no event within {self.connection.timeout} s")
        raise EOFError("the server ended the stream")

    def drop(self) -> None:
        """Hang up, as a client whose network went away."""
        try:
            self.connection.sock.shutdown(2)
        except (OSError, AttributeError):
            pass
        self.connection.close()


class LegacySession:
    """One legacy session of `server` (an mcptest.HttpServer), opened with initialize in `revision`."""

    def __init__(self, server: Any, revision: str = "2025-11-25", capabilities: Optional[dict[str, Any]] = None,
                 token: Optional[str] = None):
        """`token`: the bearer token every request of the session sends (set `token` to send another)."""
        self.server = server
        self.revision = revision
        self.token = token
        self._ids = 0
        status, headers, body = server.post(
            {"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
             "params": {"protocolVersion": revision, "capabilities": capabilities or {},
                        "clientInfo": {"name": "raw", "version": "1"}}}, headers=self._authorized(LEGACY_HEADERS))
        assert status == 200 and body["result"]["protocolVersion"] == revision, body
        self.id = headers["mcp-session-id"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _authorized(self, headers: dict[str, str]) -> dict[str, str]:
        return {**headers, "Authorization": f"Bearer {self.token}"} if self.token is not None else headers

    def headers(self, **extra: str) -> dict[str, str]:
        return self._authorized({**LEGACY_HEADERS, "Mcp-Session-Id": self.id, "MCP-Protocol-Version": self.revision,
                                 **extra})

    def post(self, message: Any, **extra: str) -> tuple[int, dict[str, str], Any]:
        return self.server.post(message, headers=self.headers(**extra))

    def ask(self, method: str, **params: Any) -> Any:
        """The result of a request, answered as JSON or as a stream (its response is the last event)."""
        status, headers, body = self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": method,
                                           "params": params})
        if headers.get("content-type") == "text/event-stream":
            body = parse_events(body)[-1].message
        assert status == 200 and "result" in body, (status, body)
        return body["result"]

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.ask("tools/call", name=tool, arguments=arguments)

    def subscribe(self, uri: str) -> None:
        assert self.ask("resources/subscribe", uri=uri) == {}

    def open(self, method: str = "GET", message: Any = None, last_event_id: Optional[str] = None,
             timeout: float = 10) -> SseStream:
        """A GET stream (the session's standalone one, or a resumed one with Last-Event-ID), or a POSTed request
        answered as a stream; the status may be an error's (then read `response` yourself)."""
        connection = self.server.connection(timeout=timeout)
        headers = self.headers() if method == "POST" else {"Accept": "text/event-stream", "Mcp-Session-Id": self.id,
                                                           "MCP-Protocol-Version": self.revision}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        body = json.dumps(message).encode() if message is not None else None
        connection.request(method, self.server.path, body=body, headers=headers)
        return SseStream(connection, connection.getresponse())

    def delete(self) -> int:
        return self.server.post(None, headers=self.headers(), method="DELETE", body=b"")[0]
