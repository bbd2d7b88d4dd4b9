"""A request head, parsed strictly (RFC 9112): bytes in, a Head or an HttpError out. No socket, no clock, no
state: the HTTP server gives it what it buffered up to the blank line, and it is unit-tested alone.

Rules of this module:
- The request line is a token, a target of visible characters and HTTP/1.0 or HTTP/1.1 (505 for another
  version, 400 for anything else). Lines end with CRLF or LF; a bare CR anywhere is 400.
- Header names are tokens; values hold no control characters (400); obsolete line folding is refused (400);
  at most MAX_HEADER_LINES lines (431). The caller bounds the head's bytes (MAX_HEAD_BYTES, 431).
- Framing is settled here, once: exactly one Host on HTTP/1.1; Content-Length is one run of at most
  MAX_LENGTH_DIGITS digits, and repeats must agree (400); any Transfer-Encoding is refused (411 for chunked,
  501 otherwise), so a body can never be read two ways.
- Keep-alive follows the version and Connection; Expect: 100-continue is noted for the caller.
"""

from __future__ import annotations

import re

from .._wire import HEADER_TOKEN

__all__ = ["MAX_HEADER_LINES", "MAX_HEAD_BYTES", "MAX_LENGTH_DIGITS", "Head", "HttpError", "parse_head"]

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
