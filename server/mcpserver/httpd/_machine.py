"""One connection's states and every rule between them: events in, actions out. No socket, no thread, no lock and
no clock (each event that starts a deadline is given the time), so every rule is a unit test
(tests/unit/test_machine.py). h11's Connection and _state.py are the model.

The loop thread and the workers are its only callers: they turn readiness, deadlines and hang-ups into its events
and carry out the action each one returns (READ, WRITE, WORK, LINGER_CLOSE, CLOSE or NOTHING).

Rules:
1. States. No request in progress (WAITING: a newcomer may take the connection's place): HANDSHAKE (TLS), IDLE,
   HEAD (some of a head came), BODY (a head came, its body is on its way), DRAIN (a refused body is skipped),
   LINGER (an answer is out; what the client still sends is dropped). A request in progress: SCREEN (its head
   goes to the app's screen before its body is in), WORKING (whole, its body taken: it waits for a worker, is
   screened there if the app screens, and runs), WRITING (a slow reader is taking the rest of a whole response),
   STREAM (a push stream). Then CLOSED.
2. Framing. Bytes are kept until they make a request head, at most MAX_HEAD_BYTES (431), searched for its end from
   where the last search stopped, so a head trickling in is not searched again whole; empty lines before a request
   are skipped (RFC 9112 §2.2). parse_head parses the head strictly and settles the framing once (rule 8). After
   any framing error the server answers and closes (rule 5), so bytes meant as a body are never read as another
   request.
3. A request goes to a worker once its whole body is in, at most max_body_bytes (413), its body taken from the
   buffer (`body`) in the same event (WORKING), so the worker's only events for it are its response's; one that
   came whole is screened there just before it runs. When the app screens and the body is not all in (or is over
   the bound, which the app's screen is asked about first), the head goes to a worker alone (SCREEN). The client
   gets `100 Continue` (an interim response) when it asked for one and its body is wanted. A client that sent its
   FIN before a whole request is closed.
4. Deadlines start when a state is entered: header_timeout for a TLS handshake and from a head's first byte (408
   if some of it came); read_timeout to idle on keep-alive, to send a body, and for a slow reader to take more of
   a response (every write that makes progress starts it again); LINGER_SECONDS for what follows an answer.
5. Answers. A response is kept alive when its request and its client allow it, the server is not stopping and its
   headers do not end the connection; without a Content-Length it is chunked on HTTP/1.1, and on HTTP/1.0 the end
   of the connection ends it, unless its status has no body (204, 304). A refusal (what screen() returned, or
   413) never waits for the body: one of at most MAX_DRAIN_BYTES is skipped to keep the connection (DRAIN), else
   the connection ends with a lingering close. An answer the server writes itself (400, 408, 431, 500, 503...)
   ends with a lingering close (LINGER): a FIN after it, then what the client sends is dropped, so an RST cannot
   destroy the answer before the client reads it.
6. Once a response is out the connection closes, lingers, drains or waits for its next request, which may be in
   already (pipelining): requests are served one at a time, in order. A client gone, or a server stopping, ends
   it.
7. A hang-up (RST, both directions closed, a failed write) ends the connection; the worker that has it closes it
   when it is done. A FIN alone is a half-close: the client may still read. While a request runs it is probed,
   once: an interim `100 Continue` before the response (HTTP/1.1), a push stream's own probe after it, which a
   peer that is really gone answers with an RST.
8. The head (parse_head: bytes in, a Head or an HttpError out, unit-tested alone in tests/unit/test_http_head.py).
   The request line is a token, a target of visible characters and HTTP/1.0 or HTTP/1.1 (505 for another
   version, 400 for anything else). Lines end with CRLF or LF; a bare CR anywhere is 400. Header names are
   tokens; values hold no control characters (400); obsolete line folding is refused (400); at most
   MAX_HEADER_LINES lines (431). Framing: exactly one Host on HTTP/1.1; Content-Length is one run of at most
   MAX_LENGTH_DIGITS digits, and repeats must agree (400); any Transfer-Encoding is refused (411 for chunked, 501
   otherwise), so a body can never be read two ways. Keep-alive follows the version and Connection; Expect:
   100-continue is noted. It is here, not in a module of its own, so that a request's head goes from the bytes
   read to its worker within the machine.
"""

from __future__ import annotations

import re

from .._version import __version__
from .._wire import HEADER_TOKEN, status_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

__all__ = ["BODY", "CLOSE", "CLOSED", "CONTINUE", "DRAIN", "HANDSHAKE", "HEAD", "IDLE", "INFINITY", "LINGER",
           "LINGER_CLOSE", "LINGER_SECONDS", "MAX_DRAIN_BYTES", "MAX_HEADER_LINES", "MAX_HEAD_BYTES",
           "MAX_LENGTH_DIGITS", "NOTHING", "READ", "RETRY_AFTER_SECONDS", "SCREEN", "SERVER_HEADER", "STREAM",
           "WAITING", "WORK", "WORKING", "WRITE", "WRITING", "Head", "HttpError", "Machine", "Rules", "chunk",
           "head_end", "parse_head", "refusal", "response_head"]

INFINITY = float("inf")
# After an answer that leaves input unread: the time the client has to send a small body (which is then skipped
# and the connection kept), or for the answer to reach it before the close.
LINGER_SECONDS = 2.0
MAX_DRAIN_BYTES = 64 * 1024  # a refused request's unread body up to this is skipped to keep the connection
RETRY_AFTER_SECONDS = 1
SERVER_HEADER = f"mcpserver/{__version__}"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
MAX_HEAD_BYTES = 32 * 1024  # request line and header lines together; past it, 431
MAX_HEADER_LINES = 100
MAX_LENGTH_DIGITS = 15  # a Content-Length longer than this is no body anyone may send

_TOKEN = re.compile(HEADER_TOKEN)
_REQUEST_LINE = re.compile(rf"({HEADER_TOKEN}) ([!-~]+) HTTP/(1\.[01])")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
# A whole well-formed header line: a token, a colon, the value without the spaces and tabs around it.
_FIELD = rf"({HEADER_TOKEN}):[ \t]*" r"((?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)[ \t]*"
_FIELD_LINE = re.compile(_FIELD)
_FIELD_LINES = re.compile(f"^{_FIELD}$", re.MULTILINE)  # every such line of a block, in one search

# The states (rule 1).
HANDSHAKE, IDLE, HEAD, BODY, DRAIN, LINGER = "handshake", "idle", "head", "body", "drain", "linger"
SCREEN, WORKING, WRITING, STREAM, CLOSED = "screen", "working", "writing", "stream", "closed"
WAITING = frozenset((HANDSHAKE, IDLE, HEAD, BODY, DRAIN, LINGER))

# The actions: what the driver that has the connection does next.
READ = "read"  # wait for more from the client (after sending `interim`, if there is one)
WRITE = "write"  # write `outgoing` (what the socket does not take now, once it is writable), then `finished()`
WORK = "work"  # hand the request to a worker: to screen its head (SCREEN), or to run it whole (WORKING)
LINGER_CLOSE = "linger close"  # the answer is out: shut the writing side and drop what still comes (LINGER)
CLOSE = "close"
NOTHING = "nothing"  # as it was: nothing to do now


class Rules:
    """What every connection of one server is held to. `stopping` is set once, when the server stops."""

    __slots__ = ("header_timeout", "max_body_bytes", "read_timeout", "screening", "stopping")

    def __init__(self, *, read_timeout: float, header_timeout: float, max_body_bytes: int, screening: bool):
        self.read_timeout = read_timeout
        self.header_timeout = header_timeout
        self.max_body_bytes = max_body_bytes
        self.screening = screening  # the app has screen(): a head goes to a worker before its body is read
        self.stopping = False


class Machine:
    """One connection's state machine: what it has received of its next request, the request in progress and its
    response, and the action each event calls for (the module's rules)."""

    __slots__ = ("after", "body", "buffer", "chunked", "deadline", "gone", "head", "interim", "keep_alive", "outgoing",
                 "peer_done", "probed", "rules", "searched", "skip", "started", "state")

    def __init__(self, rules: Rules, tls: bool, now: float):
        self.rules = rules
        self.state = HANDSHAKE if tls else IDLE
        self.deadline = now + (rules.header_timeout if tls else rules.read_timeout)
        self.buffer = bytearray()  # received and not yet taken: the next request's head, its body, what follows
        self.searched = 0  # how much of the buffer was searched for a head's end already
        self.skip = 0  # DRAIN: body bytes still to skip
        self.head: Optional[Head] = None  # the request in progress
        self.body: Optional[bytes] = None  # its body, once it is all in (WORKING)
        self.peer_done = False  # the client sent its FIN: it may still read, but sends nothing more
        self.gone = False  # the client hung up
        self.probed = False  # a half-close was probed; only a hang-up is watched for now
        self.started = False  # the response began to go out
        self.chunked = False
        self.keep_alive = False
        self.after = IDLE  # once the response is out: IDLE, DRAIN, LINGER or CLOSED
        self.interim = b""  # an interim response to send before reading on (100 Continue)
        self.outgoing = b""  # an answer to write (WRITE)

    def _enter(self, state: str, now: float) -> None:
        self.state = state
        rules = self.rules
        if state in (IDLE, BODY, WRITING):
            self.deadline = now + rules.read_timeout
        elif state in (HEAD, HANDSHAKE):
            self.deadline = now + rules.header_timeout
        elif state in (LINGER, DRAIN):  # the answer is out: what is left is a courtesy, kept short
            self.deadline = now + LINGER_SECONDS
        else:
            self.deadline = INFINITY

    # -- a request coming in ----------------------------------------------------------------------------

    def handshaken(self, now: float) -> str:
        """The TLS handshake is done: a request may have come with its last flight."""
        self._enter(IDLE, now)
        return READ

    def received(self, data: bytes, eof: bool, now: float) -> str:
        """Bytes read (b"" for none), and whether the client sent its FIN with them."""
        state = self.state
        if state == LINGER:  # an answer is out: what the client still sends is dropped
            return CLOSE if eof else READ
        if state == DRAIN:
            taken = min(self.skip, len(data))
            self.skip -= taken
            if self.skip:
                return CLOSE if eof else READ
            data = data[taken:]
            self._enter(IDLE, now)
        if data:
            self.buffer += data
        if eof:
            self.peer_done = True
        head = self.head
        if head is None:  # what the buffer holds decides (rule 2)
            try:
                head = self._take_head()
            except HttpError as refused:
                return self.answer(refused.status, refused.message)
            if head is None:
                if self.peer_done:  # the client sends no more, and what it sent is not a whole request
                    return CLOSE
                if self.state == IDLE and self.buffer:
                    self._enter(HEAD, now)  # its first byte: the head's deadline starts now
                return READ
            whole = len(self.buffer) >= head.length
            if head.length > self.rules.max_body_bytes:
                if self.rules.screening:  # the app's own bound is asked first
                    self.state = SCREEN
                    return WORK
                return self._too_large()
            if self.rules.screening and not whole:
                self.state = SCREEN
                return WORK
        if len(self.buffer) >= head.length:  # the whole request is in (most come whole): on with it (rule 3)
            return self._whole(head)
        return self._await_body(head, now)

    def _whole(self, head: Head) -> str:
        """The whole request is in: its body is taken, and a worker is to run it (rule 3)."""
        buffer = self.buffer
        if len(buffer) == head.length:
            self.buffer = bytearray()
            self.body = bytes(buffer)
        else:
            self.body = bytes(buffer[:head.length])
            del buffer[:head.length]
        self.state, self.started, self.probed = WORKING, False, False
        return WORK

    def _await_body(self, head: Head, now: float) -> str:
        """The head is in and wanted, not all of its body yet: wait for the rest (rule 3)."""
        if self.peer_done:
            return CLOSE
        if self.state != BODY:
            self._enter(BODY, now)
            if head.expect_continue:
                self.interim = CONTINUE
        return READ

    def _take_head(self) -> Optional[Head]:
        buffer = self.buffer
        if buffer.startswith((b"\r", b"\n")):  # RFC 9112 §2.2: empty lines before a request are skipped
            del buffer[:len(buffer) - len(buffer.lstrip(b"\r\n"))]
            self.searched = 0
        # From just before where the last search ended: a head trickling in is not searched again whole.
        found = head_end(buffer, max(0, self.searched - 3), MAX_HEAD_BYTES + 4)
        if found is None:
            if len(buffer) > MAX_HEAD_BYTES:
                raise HttpError(431, f"Request head larger than {MAX_HEAD_BYTES} bytes")
            self.searched = len(buffer)
            return None
        head = parse_head(bytes(buffer[:found[0]]))
        del buffer[:found[1]]
        self.searched = 0
        self.head = head
        return head

    def screened(self, refused: Optional[tuple[str, list[tuple[str, str]], bytes]], now: float) -> str:
        """What the app's screen(environ) said of the head: None to go on, else the (status, headers, body) to
        answer with; its body is then never waited for. A whole request (WORKING) is screened just before it
        runs, and this is said of it only when it is refused."""
        head = self.head
        assert head is not None
        if refused is not None:
            return self._refuse(*refused)
        if head.length > self.rules.max_body_bytes:
            return self._too_large()
        if len(self.buffer) >= head.length:
            return self._whole(head)
        return self._await_body(head, now)

    def take_interim(self) -> bytes:
        interim, self.interim = self.interim, b""
        return interim

    # -- the request in progress, and its response ------------------------------------------------------

    def respond(self, status: str, headers: list[tuple[str, str]]) -> bytes:
        """The response starts: its status line and header fields. Whether it is chunked (`chunked`) and what
        follows it (`after`) are settled here."""
        head = self.head
        assert head is not None
        keep = head.keep_alive and not self.peer_done and not self.rules.stopping
        data, self.chunked, keep = response_head(head, status, headers, keep)
        self.after = IDLE if keep else CLOSED
        self.started = True
        return data

    def _refuse(self, status: str, headers: list[tuple[str, str]], body: bytes) -> str:
        """Answer without the body: skipped if small enough, else the connection ends (rule 5)."""
        head = self.head
        assert head is not None
        taken = self.body is not None  # a whole request refused by the screen it met just before running
        unread = 0 if taken else head.length - len(self.buffer)
        keep = (head.keep_alive and not self.peer_done and not self.rules.stopping and unread <= MAX_DRAIN_BYTES)
        data, _, keep = response_head(head, status, headers, keep)
        if unread > 0:
            self.buffer.clear()
            self.skip = unread
        elif not taken:
            del self.buffer[:head.length]
        self.body = None
        self.after = (DRAIN if unread > 0 else IDLE) if keep else (LINGER if unread > 0 else CLOSED)
        self.started = True
        self.outgoing = data + (body if head.method != "HEAD" else b"")
        return WRITE

    def _too_large(self) -> str:
        body = f"The body is larger than {self.rules.max_body_bytes} bytes\n".encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        return self._refuse(status_line(413), headers, body)

    def answer(self, status: int, message: str, *extra: str) -> str:
        """An answer the server writes itself (a framing error, 408, 500, 503...), then a lingering close."""
        self.head, self.body, self.started, self.after = None, None, True, LINGER
        self.outgoing = refusal(status, message, *extra)
        return WRITE

    def failed(self) -> str:
        """The app raised: 500, unless some of its response went out already."""
        if self.started:
            return CLOSE
        return self.answer(500, "Internal server error")

    def stalled(self, now: float) -> None:
        """The socket took only part of a whole response: the loop writes the rest as the client reads."""
        self._enter(WRITING, now)

    def progressed(self, now: float) -> None:
        """A slow reader took more: its clock starts again."""
        self.deadline = now + self.rules.read_timeout

    def finished(self, now: float) -> str:
        """The whole response is out (rule 6)."""
        after = self.after
        self.head, self.body, self.started = None, None, False
        if after == IDLE and not (self.gone or self.rules.stopping):
            self.state, self.deadline = IDLE, now + self.rules.read_timeout
            if self.buffer or self.peer_done:  # a pipelined request may be in already
                return self.received(b"", False, now)
            return READ
        if after == LINGER:
            self._enter(LINGER, now)
            return LINGER_CLOSE
        if after == DRAIN:
            self._enter(DRAIN, now)
            return READ
        return CLOSE

    # -- push streams: a response the loop writes piece by piece ----------------------------------------

    def streaming(self) -> None:
        """The app's result is a push stream: the loop has the connection from now on."""
        head = self.head
        assert head is not None
        self.state = STREAM
        self.keep_alive = head.keep_alive and not self.peer_done and not self.rules.stopping

    def stream_piece(self, piece: bytes, status: str, headers: list[tuple[str, str]]) -> bytes:
        """A piece of a push stream, framed, after the response's head if it is the first."""
        data = b""
        if not self.started:
            head = self.head
            assert head is not None
            data, self.chunked, self.keep_alive = response_head(head, status, headers, self.keep_alive)
            self.started = True
        return data + (chunk(piece) if self.chunked else piece)

    def stream_probe(self, probe: bytes) -> bytes:
        """A half-close on a push stream: what finds out whether the client still reads (rule 7)."""
        self.probed = self.peer_done = True
        if not self.started:
            return CONTINUE if self.head is not None and self.head.version == "1.1" else b""
        return chunk(probe) if self.chunked else b""

    def stream_over(self, status: str, headers: list[tuple[str, str]]) -> bytes:
        """The push stream ended: what ends its response."""
        data = self.stream_piece(b"", status, headers)
        self.after = IDLE if self.keep_alive and not self.peer_done else CLOSED
        return data + (b"0\r\n\r\n" if self.chunked else b"")

    # -- the client's side: deadlines and hang-ups ------------------------------------------------------

    def deadline_passed(self, now: float) -> str:
        """The loop's sweep, for a connection it has with no request running (WAITING) or a slow reader."""
        if now < self.deadline:
            return NOTHING
        if self.state == HEAD and self.buffer:
            return self.answer(408, f"The request head took longer than {self.rules.header_timeout:g} s")
        return CLOSE

    def hung_up(self) -> None:
        """The client is gone (rule 7): nothing more is sent, and the connection is not kept."""
        self.gone = True

    def half_closed(self, watched: bool) -> bytes:
        """A FIN while a request runs: the interim response that probes whether the client still reads, when
        its app watches for a hang-up and nothing of the response went out yet (else b"")."""
        self.probed = self.peer_done = True
        head = self.head
        if watched and self.state == WORKING and not self.started and head is not None and head.version == "1.1":
            return CONTINUE
        return b""

    def closed(self) -> bool:
        """The connection closes; False if it was closed already."""
        if self.state == CLOSED:
            return False
        self.state = CLOSED
        return True


def head_end(buffer: bytearray, start: int, stop: int) -> Optional[tuple[int, int]]:
    """Where the blank line that ends a head starts and ends: the first \\r?\\n\\r?\\n in buffer[start:stop],
    or None. Two finds, where a regex search cost 42k instructions on a 400-byte request: it tries a match
    at every byte."""
    crlf = buffer.find(b"\n\r\n", start, stop)  # the common CRLF head; a bare LF one may end before it
    lf = buffer.find(b"\n\n", start, stop if crlf < 0 else crlf + 1)
    if lf >= 0:
        at, end = lf, lf + 2
    elif crlf >= 0:
        at, end = crlf, crlf + 3
    else:
        return None
    if at > start and buffer[at - 1] == 13:  # the CR of the last header line's CRLF
        at -= 1
    return at, end


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def refusal(status: int, message: str, *extra: str) -> bytes:
    """A response the server writes itself (and then closes the connection)."""
    body = (message + "\n").encode()
    lines = [f"HTTP/1.1 {status_line(status)}", f"Server: {SERVER_HEADER}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(body)}", *extra, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


_BODILESS = ("204", "304")  # statuses that never have a body (RFC 9112 §6.3): no framing, the connection kept


def response_head(head: Head, status: str, headers: list[tuple[str, str]],
                  keep_alive: bool) -> tuple[bytes, bool, bool]:
    """(the status line and header fields, whether the body is chunked, whether the connection is kept)."""
    lines = [f"HTTP/1.1 {status}", f"Server: {SERVER_HEADER}"]
    sized = False
    for name, value in headers:  # one loop, no generator frames: this runs for every answer
        lines.append(f"{name}: {value}")
        if not sized and name.lower() == "content-length":
            sized = True
    framed = not sized and head.method != "HEAD" and status[:3] not in _BODILESS
    chunked = framed and head.version == "1.1"
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif framed:
        keep_alive = False  # HTTP/1.0 and no length: the end of the body is the end of the connection
    if not keep_alive:
        lines.append("Connection: close")
    elif head.version == "1.0":
        lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), chunked, keep_alive


# -- the head (rule 8) -------------------------------------------------------------------------------------------------

class HttpError(Exception):
    """A request the server answers itself, and then closes the connection."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Head:
    """A request's line and header fields, parsed and checked."""

    __slots__ = ("expect_continue", "headers", "keep_alive", "length", "method", "target", "version")

    def __init__(self, method: str, target: str, version: str, headers: list[tuple[str, str]], length: int,
                 keep_alive: bool, expect_continue: bool):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.length = length
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue


def parse_head(data: bytes) -> Head:
    """Parse a request head (without its blank line); HttpError for anything RFC 9112 does not allow."""
    text = data.decode("latin-1")
    if text.endswith("\r"):  # the last line's CR (its LF came with the blank line)
        text = text[:-1]
    if "\r" in text.replace("\r\n", ""):  # a CR that ends no line
        raise HttpError(400, "A bare CR in the request head")
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        if re.fullmatch(r"\S+ \S+ HTTP/\d\.\d", lines[0]):
            raise HttpError(505, "Only HTTP/1.0 and HTTP/1.1 are served")
        raise HttpError(400, "Malformed request line")
    method, target, version = match.groups()
    if len(lines) - 1 > MAX_HEADER_LINES:
        raise HttpError(431, f"More than {MAX_HEADER_LINES} header lines")
    # The common case in one search of the whole block: every line a field, each match exactly one line (no
    # character class holds a newline). Otherwise each line is looked at alone, to say what is wrong.
    headers: list[tuple[str, str]] = _FIELD_LINES.findall(text, len(lines[0]) + 1)  # past the request line
    if len(headers) == len(lines) - 1:
        return _framed(method, target, version, headers)
    headers = []
    for line in lines[1:]:
        field = _FIELD_LINE.fullmatch(line)
        if field is not None:  # the common case in one match; what fails it is told apart below
            headers.append((field[1], field[2]))
            continue
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HttpError(400, "Malformed header line" if not line[:1].isspace() else "Folded header lines are "
                            "not accepted")
        value = value.strip(" \t")
        if not _FIELD_VALUE.fullmatch(value):
            raise HttpError(400, f"Header {name} holds a control character")
        headers.append((name, value))
    return _framed(method, target, version, headers)


_FRAMING = frozenset({"host", "content-length", "transfer-encoding", "connection", "expect"})


def _framed(method: str, target: str, version: str, headers: list[tuple[str, str]]) -> Head:
    hosts, connection, expect = 0, "", ""
    lengths: set[str] = set()
    encodings: list[str] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered not in _FRAMING:
            continue
        if lowered == "host":
            hosts += 1
        elif lowered == "content-length":
            lengths.update([part.strip(" \t") for part in value.split(",")] if "," in value else (value,))
        elif lowered == "transfer-encoding":
            encodings.append(value)
        elif lowered == "connection":
            connection += "," + value.lower()
        elif lowered == "expect":
            expect = value.lower()
    if hosts > 1 or (hosts == 0 and version == "1.1"):
        raise HttpError(400, "An HTTP/1.1 request needs exactly one Host header")
    if encodings:
        last = encodings[-1].split(",")[-1].strip(" \t").lower()
        if last == "chunked":
            raise HttpError(411, "Send a Content-Length; chunked bodies are not accepted")
        raise HttpError(501, f"Transfer-Encoding {encodings[-1]!r} is not supported")
    length = 0
    if lengths:
        if len(lengths) > 1:
            raise HttpError(400, "Content-Length headers disagree")
        text = lengths.pop()
        if not (text.isascii() and text.isdigit() and len(text) <= MAX_LENGTH_DIGITS):
            raise HttpError(400, "Content-Length is not a number of bytes")
        length = int(text)
    tokens = {token.strip(" \t") for token in connection.split(",")} if connection else ()
    keep_alive = "close" not in tokens and (version == "1.1" or "keep-alive" in tokens)
    return Head(method, target, version, headers, length, keep_alive, expect == "100-continue")
