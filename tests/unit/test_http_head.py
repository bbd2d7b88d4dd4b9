"""parse_head, the HTTP/1.1 request head parser: what it keeps, and the exact refusal for each flaw.

Its common case is one regular-expression search over all the header lines; when a line fails it, each
line is parsed again the long way, to say what is wrong. These pin both paths to RFC 9112's rules."""

import pytest
from mcpserver.httpd._machine import HttpError, parse_head


def test_values_lose_the_spaces_and_tabs_around_them_and_keep_those_inside():
    head = parse_head(b"POST /mcp HTTP/1.1\r\nHost:  localhost \r\nX-A:\ta \t b\t\r\nX-Empty:\r\nX-Spaces:   ")
    assert head.headers == [("Host", "localhost"), ("X-A", "a \t b"), ("X-Empty", ""), ("X-Spaces", "")]
    assert (head.method, head.target, head.version, head.keep_alive) == ("POST", "/mcp", "1.1", True)


def test_lines_may_end_with_a_bare_lf_and_the_last_with_its_cr():
    head = parse_head(b"POST /mcp HTTP/1.1\nHost: h\r\nContent-Length: 2\nX-Last: v\r")
    assert head.headers == [("Host", "h"), ("Content-Length", "2"), ("X-Last", "v")] and head.length == 2


def test_latin_1_bytes_are_kept_and_obsolete_text_is_allowed():
    head = parse_head(b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Name: caf\xe9 \x80\xff")
    assert head.headers[1] == ("X-Name", "caf\xe9 \x80\xff")


@pytest.mark.parametrize(("head", "status", "message"), [
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Cr: a\rb", 400, "A bare CR in the request head"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\r\nX: y", 400, "A bare CR in the request head"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nBad Name: x", 400, "Malformed header line"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nNoColon", 400, "Malformed header line"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\n folded: more", 400, "Folded header lines are not accepted"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Nul: a\x00b", 400, "Header X-Nul holds a control character"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Del: a\x7f", 400, "Header X-Del holds a control character"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nHost: h", 400, "An HTTP/1.1 request needs exactly one Host header"),
    (b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2", 400,
     "Content-Length headers disagree"),
    (b"POST /mcp HTTP/2.0\r\nHost: h", 505, "Only HTTP/1.0 and HTTP/1.1 are served"),
])
def test_each_flaw_has_its_own_refusal(head, status, message):
    with pytest.raises(HttpError) as refused:
        parse_head(head)
    assert (refused.value.status, str(refused.value)) == (status, message)


def test_the_end_of_a_head_is_found_where_the_regular_expression_finds_it():
    """head_end finds a head's blank line with two finds instead of a regex search (which tried a match at
    every byte): on every arrangement of CRs, LFs and other bytes, from any start to any stop, it must find
    what re.search(rb"\\r?\\n\\r?\\n") finds."""
    import itertools
    import re

    from mcpserver.httpd._machine import head_end

    pattern = re.compile(b"\r?\n\r?\n")
    checked = 0
    for size in range(9):
        for combination in itertools.product(b"\r\na", repeat=size):
            buffer = bytearray(combination)
            for start in range(size + 1):
                for stop in range(start, size + 2):
                    found = pattern.search(buffer, start, stop)
                    assert head_end(buffer, start, stop) == (None if found is None else found.span()), \
                        (bytes(buffer), start, stop)
                    checked += 1
    assert checked > 100_000


def test_environ_keys_are_made_once_per_header_name_and_only_so_many_are_kept():
    """The worker keeps each header name's CGI key (Mcp-Method -> HTTP_MCP_METHOD) to skip building it per
    request; names come from clients, so a flood of new ones must not grow that table without end."""
    from types import SimpleNamespace

    from mcpserver.httpd import _machine, _workers

    worker = SimpleNamespace(host="127.0.0.1", port=3000)
    conn = SimpleNamespace(address=("127.0.0.1", 5000), tls=None)
    for batch in range(_workers.MAX_ENVIRON_KEYS // 50 + 3):
        headers = [("Host", "h"), ("Mcp-Method", "tools/call"), ("mcp-method", "again"), ("Content-Type", "x/y")]
        headers += [(f"X-Flood-{batch}-{i}", str(i)) for i in range(50)]
        head = _machine.Head("POST", "/mcp?q=1", "1.1", headers, 0, True, False)
        environ = _workers.Worker._environ(worker, conn, head)
        assert environ["HTTP_MCP_METHOD"] == "tools/call,again" and environ["CONTENT_TYPE"] == "x/y"
        assert environ[f"HTTP_X_FLOOD_{batch}_49"] == "49" and environ["QUERY_STRING"] == "q=1"
    assert len(_workers._ENVIRON_KEYS) == _workers.MAX_ENVIRON_KEYS


@pytest.mark.parametrize("lines, length", [
    (b"Content-Length: 7", 7), (b"Content-Length: 7, 7", 7), (b"Content-Length: 7 ,\t7", 7),
    (b"Content-Length: 7\r\nContent-Length: 7", 7), (b"Content-Length: 7, 8", None), (b"Content-Length: 7,", None),
])
def test_repeated_content_lengths_must_agree(lines, length):
    """RFC 9110 §8.6: a list of equal lengths is that length; anything else is refused."""
    data = b"POST /mcp HTTP/1.1\r\nHost: h\r\n" + lines
    if length is None:
        with pytest.raises(HttpError) as refused:
            parse_head(data)
        assert refused.value.status == 400
    else:
        assert parse_head(data).length == length


@pytest.mark.parametrize("lines, version, kept", [
    (b"", "1.1", True), (b"", "1.0", False), (b"Connection: close", "1.1", False),
    (b"Connection: keep-alive", "1.0", True), (b"Connection: Upgrade, CLOSE", "1.1", False),
    (b"Connection: foo,\tkeep-alive", "1.0", True),
])
def test_keep_alive_follows_the_version_and_the_connection_tokens(lines, version, kept):
    data = f"GET /mcp HTTP/{version}\r\nHost: h\r\n".encode() + lines
    assert parse_head(data.rstrip(b"\r\n")).keep_alive is kept
