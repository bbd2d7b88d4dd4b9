"""One client cannot take the HTTP server from everyone else (issue 23): idle, slow, half-closed and
listening connections cost no slot a working request needs, and each bound holds against many
connections from one peer. Every case ends with a normal client being served."""

import json
import os
import socket
import threading
import time

import pytest
from mcptest import DEMO, EXAMPLES, SLOW_TOOLS, HttpServer, call, free_port, mcp_headers, request, start_slow_calls

NOTES = os.path.join(EXAMPLES, "notes.py")
CERTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "http", "certs")
TOKEN = "sl0t-token"
SLOW_HEAD = (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Length: 1000\r\n\r\n")  # and then not one byte of the body


def tls_client():
    ssl = pytest.importorskip("ssl", reason="this Python has no ssl module, so it cannot serve HTTPS")
    return ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))


def connect(server, source="127.0.0.1", timeout=10):
    sock = socket.create_connection((server.host, server.port), timeout=timeout, source_address=(source, 0))
    if server.scheme == "https":
        sock = server.tls.wrap_socket(sock, server_hostname="localhost")
    return sock


def raw_request(message, extra=b""):
    body = json.dumps(message).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in mcp_headers(message).items()).encode()
    return (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n" + head + extra
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def read_head(sock):
    """The response head, however the connection goes on (the socket's timeout is the bound)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    return received


def read_all(sock):
    """Everything until the server closes (the socket's timeout is the bound)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def served(server, token=None):
    message = request("tools/list", id="normal")
    headers = dict(mcp_headers(message), **({"Authorization": f"Bearer {token}"} if token else {}))
    status, _, body = server.post(message, headers=headers)
    assert status == 200 and body["id"] == "normal" and body["result"]["tools"], (status, body)
    assert server.process.poll() is None and "Traceback" not in server.stderr


def threads_of(server):
    with open(f"/proc/{server.process.pid}/status") as status:
        return int(next(line for line in status if line.startswith("Threads:")).split()[1])


def token_server(*extra, tls=False):
    if not tls:
        return HttpServer(DEMO, "--token", TOKEN, *extra)
    context = tls_client()
    cert, key = os.path.join(CERTS, "first.pem"), os.path.join(CERTS, "first.key")
    return HttpServer(DEMO, "--token", TOKEN, "--tls-cert", cert, "--tls-key", key, *extra, tls=context)


# -- 1. a body that never comes ---------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_an_unauthenticated_body_slowloris_is_answered_at_once_and_takes_no_slot(tls):
    """100 connections send a head with Content-Length: 1000 and no body: each is refused (401) before its
    body, and a client with the token is served meanwhile. Before: each held a slot until the read timeout,
    and past 64 everyone, the token's holder included, got 503."""
    with token_server(tls=tls) as server:
        slow = [connect(server) for _ in range(100)]
        try:
            for sock in slow:
                sock.sendall(SLOW_HEAD)
            assert read_head(slow[0]).startswith(b"HTTP/1.1 401 ")  # answered before its body
            served(server, TOKEN)
            assert server.post(request("tools/list"))[0] == 401  # refused for its own reason, not 503
        finally:
            for sock in slow:
                sock.close()


def test_a_body_slowloris_under_oauth_leaves_the_metadata_and_the_refusals_to_everyone():
    port = free_port()
    with HttpServer(DEMO, "--port", str(port), "--resource", f"http://127.0.0.1:{port}/mcp",
                    "--authorization-server", "https://auth.example.com") as server:
        slow = [connect(server) for _ in range(100)]
        try:
            for sock in slow:
                sock.sendall(SLOW_HEAD)
            assert read_head(slow[-1]).startswith(b"HTTP/1.1 401 ")
            status, headers, _ = server.post(request("tools/list"))
            assert status == 401 and "resource_metadata=" in headers["www-authenticate"]
            status, _, body = server.post(method="GET", path="/.well-known/oauth-protected-resource/mcp", headers={})
            assert status == 200 and body["resource"] == f"http://127.0.0.1:{port}/mcp"
        finally:
            for sock in slow:
                sock.close()


@pytest.mark.parametrize("extra", [(), ("--max-connections", "16")], ids=["default", "16-connections"])
def test_a_body_slowloris_on_loopback_without_a_token_takes_no_slot(extra):
    """Without a token the head passes, so the body is waited for: by the loop, as a connection that can
    be reclaimed, not by a slot. 100 such connections (or 40 against 16 connections) and a normal client."""
    with HttpServer(DEMO, *extra) as server:
        slow = [connect(server) for _ in range(40 if extra else 100)]
        try:
            for sock in slow:
                sock.sendall(SLOW_HEAD)
            time.sleep(0.2)  # let the server read every head: the normal client comes after them all
            served(server)
        finally:
            for sock in slow:
                sock.close()


# -- 2. listen streams ----------------------------------------------------------------------------------

def open_listen(server, request_id, source="127.0.0.1", token=None):
    """A raw subscriptions/listen; (socket, status line, the first bytes of the answer)."""
    message = request("subscriptions/listen", request_id, notifications={"resourcesListChanged": True})
    sock = connect(server, source)
    sock.sendall(raw_request(message, f"Authorization: Bearer {token}\r\n".encode() if token else b""))
    answer = b""
    while not _whole(answer):
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    return sock, answer.split(b"\r\n", 1)[0], answer


def _whole(answer):
    """A stream's head and acknowledgement, or a whole plain answer."""
    head, found, body = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    if head.startswith(b"HTTP/1.1 200 OK") and b"event-stream" in head:
        return b"acknowledged" in body
    length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    return not length or len(body) >= int(length[0].split(b":")[1])


def test_64_listen_streams_from_one_client_leave_the_server_to_everyone_else():
    """Before: 64 streams from one client took all 64 connections, so every other request and every other
    listen got 503, for as long as that client liked."""
    with HttpServer(NOTES) as server:
        opened = [open_listen(server, f"mine-{n}") for n in range(64)]
        try:
            statuses = [status[9:12] for _, status, _ in opened]
            assert statuses == [b"200"] * 32 + [b"503"] * 32
            refused = opened[-1][2]
            error = json.loads(refused.split(b"\r\n\r\n", 1)[1])["error"]
            assert error["code"] == -32603 and error["data"] == {"limit": 32, "per": "peer"}
            assert server.post(request("tools/list"))[0] == 200
            other, status, _ = open_listen(server, "theirs", source="127.0.0.2")
            other.close()
            assert status == b"HTTP/1.1 200 OK"
        finally:
            for sock, _, _ in opened:
                sock.close()


def test_a_static_token_is_one_principal_for_listen_streams_from_every_peer():
    with HttpServer(NOTES, "--token", TOKEN, "--max-listeners-per-peer", "3",
                    "--max-listeners-per-principal", "5") as server:
        first = [open_listen(server, f"a{n}", "127.0.0.2", TOKEN) for n in range(4)]
        second = [open_listen(server, f"b{n}", "127.0.0.3", TOKEN) for n in range(3)]
        try:
            assert [status[9:12] for _, status, _ in first] == [b"200", b"200", b"200", b"503"]
            assert [status[9:12] for _, status, _ in second] == [b"200", b"200", b"503"]
            error = json.loads(second[-1][2].split(b"\r\n\r\n", 1)[1])["error"]
            assert error["data"] == {"limit": 5, "per": "principal"}
            served(server, TOKEN)
        finally:
            for sock, _, _ in first + second:
                sock.close()


def test_a_closed_listen_stream_gives_its_slot_back_promptly():
    """A client that closes its stream (a FIN, as close() sends) is probed, its RST ends the stream: the
    per-peer slots come back without waiting for a keep-alive comment."""
    with HttpServer(NOTES, "--max-listeners-per-peer", "4") as server:
        for round_number in range(3):
            opened = []
            deadline = time.monotonic() + 20
            while len(opened) < 4:  # the slots the last round gave back may take a moment to return
                sock, status, _ = open_listen(server, f"r{round_number}-{len(opened)}")
                if status == b"HTTP/1.1 200 OK":
                    opened.append(sock)
                else:
                    sock.close()
                    assert time.monotonic() < deadline, "closed streams kept their slots"
                    time.sleep(0.05)
            for sock in opened:
                sock.close()
        served(server)


# -- 3. a half-close is not a hang-up ---------------------------------------------------------------------

def test_a_half_close_after_a_tools_call_still_gets_its_answer(tmp_path):
    """Before: the FIN cancelled the call and the answer was 202 Accepted with no JSON-RPC response."""
    with HttpServer(SLOW_TOOLS) as server, connect(server) as sock:
        sock.sendall(raw_request(call("ticker", id="half", seconds=0.5, path=str(tmp_path / "ticks"))))
        sock.shutdown(socket.SHUT_WR)  # legal HTTP/1.1: the client has said all it will, and reads on
        received = read_all(sock)
        finals = [part for part in received.split(b"HTTP/1.1 ")[1:] if not part.startswith(b"100 ")]
        assert len(finals) == 1 and finals[0].startswith(b"200 OK"), received[:300]
        answer = json.loads(finals[0].split(b"\r\n\r\n", 1)[1])
        assert answer["id"] == "half" and answer["result"]["content"][0]["text"] == "ticked"


def test_a_half_closed_listen_stream_goes_on_streaming():
    with HttpServer(NOTES) as server:
        sock, status, _ = open_listen(server, "half")
        try:
            assert status == b"HTTP/1.1 200 OK"
            sock.shutdown(socket.SHUT_WR)
            time.sleep(0.2)  # the server sees the FIN and probes; a client that reads stays
            assert server.post(call("write_note", name="after", text="x"))[0] == 200
            received = b""
            while b"list_changed" not in received:
                chunk = sock.recv(65536)
                assert chunk, f"the stream ended: {received!r}"
                received += chunk
        finally:
            sock.close()


# -- 4. what hundreds of waiting clients cost ------------------------------------------------------------------

def test_hundreds_of_slow_idle_and_listening_clients_cost_no_thread_each():
    # The pool may grow to --max-requests workers under load (a busy machine hands a request over before the
    # last worker is free again); a small pool makes "no thread per connection" a tight bound.
    workers = 8
    with HttpServer(NOTES, "--max-listeners-per-peer", "200", "--max-requests", str(workers)) as server:
        held = []
        try:
            served(server)
            before = threads_of(server)
            for _ in range(150):
                sock = connect(server)
                sock.sendall(SLOW_HEAD)
                held.append(sock)
            for _ in range(150):
                sock = connect(server)
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: loc")  # half a head
                held.append(sock)
            held += [connect(server) for _ in range(100)]  # idle
            held += [open_listen(server, f"l{n}")[0] for n in range(150)]
            served(server)
            assert threads_of(server) <= before + workers, "a thread per connection"
        finally:
            for sock in held:
                sock.close()


# -- 5. the request pool ---------------------------------------------------------------------------------

def test_beyond_the_running_and_queued_requests_a_request_gets_503_with_retry_after():
    with HttpServer(SLOW_TOOLS, "--max-requests", "2", "--max-queued", "1") as server:
        answers = []
        callers = start_slow_calls(server, 2, 1.5, answers)
        queued = threading.Thread(target=lambda: answers.append(server.post(call("pid"))[0]))
        queued.start()
        time.sleep(0.3)  # it waits in the queue: no worker is free
        status, headers, _ = server.post(call("pid"))
        assert status == 503 and headers["retry-after"] == "1"
        for thread in [*callers, queued]:
            thread.join(15)
        assert sorted(answers) == [200, 200, 200]
        served(server)


# -- 6. slow readers ------------------------------------------------------------------------------------------

def test_clients_that_never_read_their_big_answers_do_not_lock_everyone_out():
    """A response the client does not read is written by the loop; such writers give their places to
    newcomers when nothing else can. Before: each held a thread and a slot, and newcomers got 503."""
    with HttpServer(DEMO, "--max-connections", "8") as server:
        stuck = []
        try:
            for n in range(12):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(10)
                sock.connect((server.host, server.port))
                sock.sendall(raw_request(call("big", id=n, size=4_000_000)))  # and never reads the answer
                stuck.append(sock)
                time.sleep(0.05)
            served(server)
        finally:
            for sock in stuck:
                sock.close()


# -- 7. TLS handshakes that never start --------------------------------------------------------------------

def test_tls_clients_that_never_start_their_handshake_take_no_slot():
    with token_server(tls=True) as server:
        silent = [socket.create_connection((server.host, server.port), timeout=10) for _ in range(200)]
        try:
            served(server, TOKEN)
        finally:
            for sock in silent:
                sock.close()
