"""Malformed and hostile HTTP against the built-in server: framing, smuggling, slow and idle clients,
header tricks, log forging. Every case ends with a normal request on a fresh connection being served."""

import json
import os
import select
import socket
import time

import pytest
from mcptest import DEMO, HttpServer, call, mcp_headers, request

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_tools.py")


@pytest.fixture(scope="module")
def demo():
    with HttpServer(DEMO) as server:
        yield server


def still_serving(server):
    status, _, body = server.post(call("echo", id="after", text="still here"))
    assert status == 200 and body["result"]["content"][0]["text"] == "still here"
    assert server.process.poll() is None
    assert "Traceback" not in server.stderr


def exchange(server, data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes; return everything the server sends until it closes the connection."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as connection:
        connection.sendall(data)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = connection.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                return received
            received += chunk
        raise AssertionError(f"the server kept the connection open; it sent {received[:300]!r}")


def head_lines(message: dict, *, length: str, extra: str = "") -> bytes:
    headers = "".join(f"{k}: {v}\r\n" for k, v in mcp_headers(message).items())
    return f"POST /mcp HTTP/1.1\r\nHost: localhost\r\n{headers}Content-Length: {length}\r\n{extra}\r\n".encode()


def smuggled() -> bytes:
    """A whole second request, which a server that misreads the first one's length would run."""
    inner = json.dumps(call("echo", id="smuggled", text="smuggled")).encode()
    return head_lines(call("echo", id="smuggled", text="smuggled"), length=str(len(inner))) + inner


@pytest.mark.parametrize("length", ["+{n}", "-{n}", "{n}_0", "0x{n}", "{n}, 1", "\xb2", "99999999999999999999999999",
                                    ""])
def test_a_content_length_that_is_not_plain_digits_is_400_and_closes(demo, length):
    second = smuggled()
    data = head_lines(request("tools/list"), length=length.format(n=len(second))).replace(
        "\xb2".encode(), b"\xb2") + second
    received = exchange(demo, data)
    assert received.startswith(b"HTTP/1.1 400"), received[:200]
    assert b"smuggled" not in received and received.count(b"HTTP/1.1 ") == 1
    still_serving(demo)


@pytest.mark.parametrize("length", ["{n} ", " {n}", "{n}, {n}", "000{n}"])
def test_a_content_length_with_spaces_or_repeated_is_that_length_and_nothing_is_smuggled(demo, length):
    # RFC 9110/9112: spaces around a field value are not part of it, and a list of one repeated value
    # may stand for that value. Either way exactly that many bytes are the body.
    second = smuggled()
    data = head_lines(request("tools/list"), length=length.format(n=len(second))) + second
    with socket.create_connection((demo.host, demo.port), timeout=5) as connection:
        connection.sendall(data)
        time.sleep(0.5)
        connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    assert received.count(b"HTTP/1.1 ") == 1 and b'"smuggled"' not in received, received[:400]
    assert received.startswith(b"HTTP/1.1 400") and b"-32700" in received  # the body is not JSON
    still_serving(demo)


@pytest.mark.parametrize("extra", ["Content-Length: 1\r\n", "Transfer-Encoding: chunked\r\n",
                                   "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n",
                                   "Transfer-Encoding: gzip, chunked\r\n"])
def test_conflicting_or_unsupported_framing_is_refused_and_closes(demo, extra):
    body = json.dumps(request("tools/list")).encode()
    data = head_lines(request("tools/list"), length=str(len(body)), extra=extra) + body + smuggled()
    received = exchange(demo, data)
    assert received[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 411", b"HTTP/1.1 501"), received[:200]
    assert received.count(b"HTTP/1.1 ") == 1
    still_serving(demo)


@pytest.mark.parametrize("request_line", [b"POST /mcp HTTP/1.1 extra", b"POST  /mcp HTTP/1.1", b"POST /mcp HTTP/9.9",
                                          b"P\x00ST /mcp HTTP/1.1", b"POST /m\x7fcp HTTP/1.1", b"\xff\xfe",
                                          b"POST /mcp"])
def test_a_malformed_request_line_is_refused_and_closes(demo, request_line):
    received = exchange(demo, request_line + b"\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
    assert received[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 505"), received[:200]
    still_serving(demo)


@pytest.mark.parametrize("header", [b"Bad Name: x", b"NoColon", b" folded: continuation", b"X-Nul: a\x00b",
                                    b"X-Cr: a\rb", b"Host: localhost"])
def test_a_malformed_or_repeated_header_line_is_400(demo, header):
    body = json.dumps(request("tools/list")).encode()
    head = head_lines(request("tools/list"), length=str(len(body))).replace(b"\r\n\r\n", b"\r\n" + header + b"\r\n\r\n")
    received = exchange(demo, head + body)
    assert received.startswith(b"HTTP/1.1 400"), received[:200]
    still_serving(demo)


def test_a_request_head_sent_a_byte_a_second_is_cut_off_at_the_head_deadline():
    with HttpServer(DEMO, "--header-timeout", "1", "--read-timeout", "30") as server:
        head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100
        with socket.create_connection((server.host, server.port), timeout=10) as slow:
            sent = 0
            for byte in head:  # the whole head takes 24 s at this pace; the deadline is 1 s
                try:
                    slow.sendall(bytes([byte]))
                except OSError:
                    break
                sent += 1
                readable, _, _ = select.select([slow], [], [], 0.2)
                if readable:  # the server answered (408) or closed: cut off
                    assert slow.recv(1024)[:12] in (b"", b"HTTP/1.1 408")
                    break
            assert sent < len(head) // 2, "the trickling head was not cut off"
        still_serving(server)


def test_idle_and_trickling_connections_cannot_lock_everyone_out():
    with HttpServer(DEMO, "--max-connections", "8") as server:
        idle = [socket.create_connection((server.host, server.port), timeout=10) for _ in range(40)]
        try:
            for connection in idle[:20]:
                connection.sendall(b"POST /mcp HTTP/1.1\r\nHost: loc")  # half a head, then nothing
            time.sleep(0.2)
            still_serving(server)  # a real request finds a slot: the longest-waiting idle one gives way
        finally:
            for connection in idle:
                connection.close()
        still_serving(server)


def test_a_thousand_idle_connections_then_a_normal_request():
    with HttpServer(DEMO) as server:
        idle = []
        try:
            for _ in range(1000):
                idle.append(socket.create_connection((server.host, server.port), timeout=10))
            still_serving(server)
        finally:
            for connection in idle:
                connection.close()
        still_serving(server)


def test_a_request_line_that_forges_a_log_line_is_escaped():
    with HttpServer(DEMO) as server:
        body = json.dumps(request("tools/list")).encode()
        head = head_lines(request("tools/list"), length=str(len(body))).replace(
            b"POST /mcp ", b"POST /mcp%0a2026-01-01T00:00:00%20INFO%20forged%1b[31m ")
        with socket.create_connection((server.host, server.port), timeout=10) as connection:
            connection.sendall(head + body)
            assert connection.recv(1024).startswith(b"HTTP/1.1 404")
        still_serving(server)
        server.wait_for_stderr('"POST /mcp" 200')
        for line in server.stderr.splitlines():
            assert not line.startswith("2026-01-01T00:00:00"), line
            assert "\x1b" not in line, line
        assert "%0a" in server.stderr or "\\n" in server.stderr


def test_an_mcp_header_spelt_with_an_underscore_is_not_that_header(demo):
    message = request("tools/list")
    headers = mcp_headers(message)
    headers["Mcp_Method"] = headers.pop("Mcp-Method")
    status, _, body = demo.post(message, headers=headers)
    assert status == 400 and body["error"]["code"] == -32020 and "Mcp-Method" in body["error"]["message"]


def test_an_x_mcp_header_name_with_an_underscore_works():
    with HttpServer(TOOLS) as server:
        message = call("region_echo", region="eu-west")
        headers = dict(mcp_headers(message), **{"Mcp-Param-Cloud_Region": "eu-west"})
        status, _, body = server.post(message, headers=headers)
        assert status == 200, body
        assert body["result"]["content"][0]["text"] == "eu-west"


def test_a_name_that_is_not_a_string_is_invalid_params_not_an_internal_error(demo):
    for name in (["echo"], {"tool": "echo"}, 5, None):
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"_meta": mcp_meta(), "name": name, "arguments": {}}}
        headers = dict(mcp_headers(request("tools/list")), **{"Mcp-Method": "tools/call", "Mcp-Name": "echo"})
        status, _, body = demo.post(message, headers=headers)
        assert body["error"]["code"] in (-32602, -32020) and status in (200, 400), (name, status, body)
    still_serving(demo)


@pytest.mark.parametrize("message", [{"method": []}, {"jsonrpc": "2.0", "id": 1, "method": {}},
                                     {"jsonrpc": "2.0", "id": [], "method": "tools/call", "params": {}},
                                     {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/call", "params": {}}])
def test_an_id_or_method_of_the_wrong_type_is_an_invalid_request_not_a_500(demo, message):
    """Found by make fuzz: an array or object as the method reached a set lookup (TypeError, 500)."""
    status, _, body = demo.post(message, headers={"Content-Type": "application/json"})
    assert status == 400 and body["error"]["code"] == -32600, (status, body)
    still_serving(demo)


def mcp_meta():
    return request("tools/list")["params"]["_meta"]


def test_a_server_bound_to_another_loopback_address_accepts_its_own_host_header():
    with HttpServer(DEMO, "--host", "127.0.0.2") as server:
        assert server.host == "127.0.0.2"
        still_serving(server)


def test_the_token_from_a_file_is_required_and_never_in_the_process_environment(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-from-file\n")
    with HttpServer(DEMO, "--token-file", str(token_file)) as server:
        message = request("tools/list")
        assert server.post(message)[0] == 401
        assert server.post(message, headers=dict(mcp_headers(message), Authorization="Bearer s3cret-from-file"))[0] \
            == 200
        with open(f"/proc/{server.process.pid}/environ", "rb") as environ:
            assert b"s3cret" not in environ.read()
        with open(f"/proc/{server.process.pid}/cmdline", "rb") as cmdline:
            assert b"s3cret" not in cmdline.read()


def test_a_token_in_the_environment_is_scrubbed_from_the_process_environment():
    with HttpServer(DEMO, env={"MCPSERVER_TOKEN": "s3cret-from-env"}) as server:
        message = request("tools/list")
        assert server.post(message, headers=dict(mcp_headers(message), Authorization="Bearer s3cret-from-env"))[0] \
            == 200
        with open(f"/proc/{server.process.pid}/environ", "rb") as environ:
            assert b"s3cret" not in environ.read()
