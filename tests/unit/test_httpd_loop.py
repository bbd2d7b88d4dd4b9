"""The HTTP server's loop as the driver of a connection's machine, on a real socket pair: what it does with the
machine's actions (tests/unit/test_machine.py holds the rules themselves; tests/http and tests/hostile the whole
server)."""

import socket
import time

import pytest
from mcpserver.httpd._accepting import Door
from mcpserver.httpd._loop import Loop
from mcpserver.httpd._machine import IDLE, READ, WORK, WRITING, Rules

GET = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"


@pytest.fixture
def loop_and_connection():
    door = Door("127.0.0.1", 0, max_connections=4, tls=None)
    rules = Rules(read_timeout=30.0, header_timeout=10.0, max_body_bytes=1000, screening=False)
    loop = Loop(door, rules, would_block=(BlockingIOError, InterruptedError), tls_eof=())
    client = socket.create_connection((door.host, door.port))
    deadline = time.monotonic() + 10
    while True:
        try:
            sock, address = door.listener.accept()
            break
        except BlockingIOError:
            assert time.monotonic() < deadline, "the connection was never accepted"
            time.sleep(0.01)
    loop._open(sock, address)
    yield loop, loop.connections[sock.fileno()], client
    client.close()
    sock.close()
    door.listener.close()


def test_a_pipelined_request_after_a_slow_readers_response_goes_to_a_worker_and_out_of_reach(loop_and_connection):
    loop, conn, client = loop_and_connection
    submitted = []
    loop.submit = lambda handed: submitted.append(handed) or True
    machine = conn.machine
    assert machine.received(GET + GET, False, time.monotonic()) == WORK  # two requests in one read
    conn.queue(machine.respond("200 OK", [("Content-Length", "2")]) + b"ok")
    machine.stalled(time.monotonic())  # the client had not read yet: the loop writes the rest
    loop.enter(conn)
    assert machine.state == WRITING and conn in loop.writers and conn not in loop.waiting
    loop._do(conn, loop._write(conn))  # now the socket takes it: the second request is next
    assert client.recv(4096).endswith(b"\r\n\r\nok")
    # A worker has it: a newcomer may not take its place (neither table offers it), nor does the sweep judge it.
    assert submitted == [conn] and conn.busy and conn not in loop.writers and conn not in loop.waiting


def test_a_connection_given_back_by_its_worker_waits_again_reclaimable(loop_and_connection):
    loop, conn, _ = loop_and_connection
    loop.submit = lambda handed: True
    machine = conn.machine
    loop._do(conn, machine.received(GET, False, time.monotonic()))
    assert conn.busy and conn not in loop.waiting
    machine.respond("200 OK", [("Content-Length", "0")])
    assert machine.finished(time.monotonic()) == READ and machine.state == IDLE
    loop.enter(conn)  # what a worker does when the client's next request has not come within its linger
    assert not conn.busy and list(loop.waiting) == [conn]
