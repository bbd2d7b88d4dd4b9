"""What the benchmark sends and how it reads answers: request bytes, a stdio line reader, a raw HTTP client.

Both clients do as little as they can while the clock runs: they collect raw bytes, and every answer
is parsed and checked after the clock stops (`check_echo`, `check_text`). A wrong answer is a failure
of the system that gave it, never a number.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import time
from typing import Any, Optional

PROTOCOL_VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
PAYLOAD_CHARS = 500_000


class WrongAnswer(Exception):
    """An answer that is missing, malformed or not the one asked for."""


class Timeout(Exception):
    """No answer within the deadline."""


def call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"_meta": META, "name": tool, "arguments": arguments}}


def progress_call(request_id: int, count: int) -> dict[str, Any]:
    """tools/call steps(count) with a progress token: the token is the request id, as a string."""
    message = call(request_id, "steps", count=count)
    message["params"]["_meta"] = {**META, "progressToken": f"p{request_id}"}
    return message


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def echo_text(request_id: int) -> str:
    return f"echo {request_id}"


def echo_line(request_id: int, tool: str = "echo") -> bytes:
    return encode(call(request_id, tool, text=echo_text(request_id))) + b"\n"


def payload_text() -> str:
    """The 500,000-character argument: printable ASCII, so every system puts it on the wire as it is."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-"
    return (alphabet * (PAYLOAD_CHARS // len(alphabet) + 1))[:PAYLOAD_CHARS]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def answer_text(raw: bytes, request_id: int) -> str:
    """The text of content[0] of a successful tools/call answer with this id; WrongAnswer otherwise."""
    try:
        message = json.loads(raw)
    except ValueError as exc:
        raise WrongAnswer(f"not JSON ({exc}): {raw[:120]!r}") from None
    if not isinstance(message, dict) or message.get("id") != request_id or message.get("jsonrpc") != "2.0":
        raise WrongAnswer(f"not the answer to id {request_id}: {raw[:120]!r}")
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise WrongAnswer(f"id {request_id} failed: {raw[:200]!r}")
    content = result.get("content")
    if not (isinstance(content, list) and content and isinstance(content[0], dict)
            and content[0].get("type") == "text" and isinstance(content[0].get("text"), str)):
        raise WrongAnswer(f"id {request_id}: no text content: {raw[:200]!r}")
    return str(content[0]["text"])


def check_echo(raw: bytes, request_id: int) -> None:
    text = answer_text(raw, request_id)
    if text != echo_text(request_id):
        raise WrongAnswer(f"id {request_id}: echo returned {text[:60]!r}")


def check_progress(raw: list[bytes], request_id: int, count: int) -> int:
    """The messages received for a steps(count) call: notifications, then its answer (last). Every
    notification must be progress for this request's token, of `count`, strictly increasing, the last
    one `count` itself; the answer must be "`count` steps". Returns how many notifications there were."""
    if not raw:
        raise WrongAnswer(f"id {request_id}: nothing received")
    text = answer_text(raw[-1], request_id)
    if text != f"{count} steps":
        raise WrongAnswer(f"id {request_id}: steps returned {text[:60]!r}")
    last = 0.0
    for line in raw[:-1]:
        try:
            note = json.loads(line)
        except ValueError:
            raise WrongAnswer(f"id {request_id}: not JSON: {line[:120]!r}") from None
        params = note.get("params") if isinstance(note, dict) else None
        if (not isinstance(params, dict) or note.get("method") != "notifications/progress"
                or params.get("progressToken") != f"p{request_id}" or params.get("total") != count):
            raise WrongAnswer(f"id {request_id}: not this request's progress: {line[:160]!r}")
        if not params.get("progress", 0) > last:
            raise WrongAnswer(f"id {request_id}: progress {params.get('progress')} after {last}")
        last = params["progress"]
    if len(raw) > 1 and last != count:
        raise WrongAnswer(f"id {request_id}: the last progress was {last}, not {count}")
    return len(raw) - 1


def check_text(raw: bytes, request_id: int, length: int, digest: str) -> None:
    text = answer_text(raw, request_id)
    if len(text) != length or sha256(text) != digest:
        raise WrongAnswer(f"id {request_id}: {len(text)} characters (sha256 {sha256(text)[:12]}), "
                          f"expected {length} (sha256 {digest[:12]})")


class LineReader:
    """Lines from a pipe, with a deadline on every read."""

    def __init__(self, fd: int):
        self.fd = fd
        self._buffer = bytearray()
        self._scanned = 0

    def line(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            self._fill(deadline)

    def lines(self, count: int, timeout: float) -> list[bytes]:
        """`count` lines, reading in large chunks and splitting only at the end."""
        deadline = time.monotonic() + timeout
        chunks = [bytes(self._buffer)]
        seen = self._buffer.count(b"\n")
        self._buffer.clear()
        self._scanned = 0
        while seen < count:
            chunk = self._read(deadline)
            chunks.append(chunk)
            seen += chunk.count(b"\n")
        data = b"".join(chunks)
        parts = data.split(b"\n")
        self._buffer += b"\n".join(parts[count:])
        return [part + b"\n" for part in parts[:count]]

    def through_last(self, marker: bytes, timeout: float) -> list[bytes]:
        """Lines until one without `marker` ends what has arrived: for a request answered last, after
        notifications that all carry `marker`. Only the last complete line of each read is looked at
        while the clock runs; the caller checks all of them after it stops."""
        deadline = time.monotonic() + timeout
        chunks = [bytes(self._buffer)]
        self._buffer.clear()
        self._scanned = 0
        tail = chunks[0]
        while True:
            if tail.endswith(b"\n"):
                start = tail.rfind(b"\n", 0, len(tail) - 1) + 1
                if marker not in tail[start:]:
                    break
            chunk = self._read(deadline)
            chunks.append(chunk)
            tail = tail[-65536:] + chunk if not chunk.endswith(b"\n") or b"\n" not in chunk[:-1] else chunk
        return [line + b"\n" for line in b"".join(chunks).split(b"\n")[:-1]]

    def _fill(self, deadline: float) -> None:
        self._buffer += self._read(deadline)

    def _read(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            raise Timeout("no answer in time")
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise WrongAnswer("the server closed stdout")
        return chunk


class HttpResponse:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, wire_bytes: int):
        self.status = status
        self.headers = headers
        self.body = body
        self.wire_bytes = wire_bytes


class HttpClient:
    """HTTP/1.1 POSTs on one keep-alive connection; reconnects when the server closes it."""

    def __init__(self, host: str, port: int, path: str = "/mcp", timeout: float = 30.0):
        self.host, self.port, self.path, self.timeout = host, port, path, timeout
        self.sock: Optional[socket.socket] = None
        self.connections = 0
        self._buffer = bytearray()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self._buffer.clear()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections += 1
        return sock

    def request_bytes(self, body: bytes, method: str = "tools/call", name: Optional[str] = None,
                      authorization: Optional[str] = None) -> bytes:
        head = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Content-Type: application/json",
                "Accept: application/json, text/event-stream", f"MCP-Protocol-Version: {PROTOCOL_VERSION}",
                f"Mcp-Method: {method}"]
        if name is not None:
            head.append(f"Mcp-Name: {name}")
        if authorization is not None:
            head.append(f"Authorization: {authorization}")
        head.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    def send(self, request: bytes) -> HttpResponse:
        if self.sock is None:
            self.sock = self._connect()
        try:
            self.sock.sendall(request)
            response = self._receive(self.sock)
        except (ConnectionError, WrongAnswer):
            if self._buffer or self.connections == 0:
                raise
            self.close()  # the server closed an idle keep-alive connection: try once on a new one
            self.sock = self._connect()
            self.sock.sendall(request)
            response = self._receive(self.sock)
        if response.headers.get("connection", "").lower() == "close":
            self.close()
        return response

    def _receive(self, sock: socket.socket) -> HttpResponse:
        buffer = self._buffer
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            self._recv(sock, buffer)
        head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        version, status = head[0].split(" ", 2)[:2]
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(buffer) < start + length:
                self._recv(sock, buffer)
            body = bytes(buffer[start:start + length])
            used = start + length
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body, used = self._chunked(sock, buffer, start)
        else:  # read to close
            while self._recv(sock, buffer, eof_ok=True):
                pass
            body, used = bytes(buffer[start:]), len(buffer)
            headers["connection"] = "close"
        if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        del buffer[:used]
        return HttpResponse(int(status), headers, body, used)

    def _chunked(self, sock: socket.socket, buffer: bytearray, start: int) -> tuple[bytes, int]:
        parts = []
        position = start
        while True:
            while buffer.find(b"\r\n", position) < 0:
                self._recv(sock, buffer)
            line_end = buffer.find(b"\r\n", position)
            size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
            position = line_end + 2
            while len(buffer) < position + size + 2:
                self._recv(sock, buffer)
            parts.append(bytes(buffer[position:position + size]))
            position += size + 2
            if size == 0:
                return b"".join(parts), position

    def _recv(self, sock: socket.socket, buffer: bytearray, eof_ok: bool = False) -> bool:
        chunk = sock.recv(1 << 20)
        if not chunk:
            if eof_ok:
                return False
            raise WrongAnswer("the server closed the connection mid-response")
        buffer += chunk
        return True


# -- the legacy era: an initialize handshake first, then requests without the modern _meta --------------

LEGACY_VERSION = "2025-11-25"  # the newest initialize-based revision: what the SDKs' 1.x clients ask for
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def legacy_initialize(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}}


def legacy_echo_line(request_id: int, tool: str = "echo") -> bytes:
    """tools/call echo as a client of a legacy session sends it: no _meta."""
    return encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": {"text": echo_text(request_id)}}}) + b"\n"


def check_initialized(raw: bytes, request_id: int) -> None:
    """The InitializeResult for `request_id`, in the revision asked for."""
    try:
        message = json.loads(raw)
    except ValueError:
        raise WrongAnswer(f"initialize: not JSON: {raw[:120]!r}") from None
    result = message.get("result") if isinstance(message, dict) and message.get("id") == request_id else None
    if not isinstance(result, dict) or result.get("protocolVersion") != LEGACY_VERSION:
        raise WrongAnswer(f"initialize was not answered with {LEGACY_VERSION}: {raw[:200]!r}")


def legacy_http_request(client: HttpClient, body: bytes, session_id: Optional[str], negotiated: bool) -> bytes:
    """A POST as a 2025-11-25 client sends it: no Mcp-Method; MCP-Protocol-Version and the session's id
    (when the server minted one) on every request after initialize."""
    head = [f"POST {client.path} HTTP/1.1", f"Host: {client.host}:{client.port}", "Content-Type: application/json",
            "Accept: application/json, text/event-stream"]
    if negotiated:
        head.append(f"MCP-Protocol-Version: {LEGACY_VERSION}")
    if session_id:
        head.append(f"Mcp-Session-Id: {session_id}")
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def message_of(response: HttpResponse) -> bytes:
    """The JSON-RPC answer in a response: the body, or the last data frame of an SSE stream."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.body
    frames = [line[len(b"data:"):].strip() for line in response.body.split(b"\n") if line.startswith(b"data:")]
    frames = [frame for frame in frames if frame]
    if not frames:
        raise WrongAnswer(f"an SSE stream without data: {response.body[:200]!r}")
    return frames[-1]
