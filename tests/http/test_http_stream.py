"""Requests in flight over HTTP: SSE responses for progress, and a client that goes away cancels."""

import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest
from mcptest import (
    GUNICORN_MISSING,
    HAS_GUNICORN,
    META,
    SLOW_TOOLS,
    HttpServer,
    call,
    gunicorn_server,
    mcp_headers,
    raw_post,
    read_text,
)

SSE = {"Accept": "application/json, text/event-stream"}

@pytest.fixture(scope="module")
def tools():
    with HttpServer(SLOW_TOOLS) as server:
        yield server


def with_token(message, token):
    message["params"]["_meta"] = dict(META, progressToken=token)
    return message


def open_stream(server, message, accept="application/json, text/event-stream"):
    """POST `message`; return (connection, response) with the response head read."""
    connection = server.connection()
    headers = dict(mcp_headers(message), Accept=accept)
    connection.request("POST", server.path, body=json.dumps(message).encode(), headers=headers)
    return connection, connection.getresponse()


def events(response):
    """The SSE data frames of a response, decoded, until the stream ends."""
    while True:
        line = response.readline()
        if not line:
            return
        if line.startswith(b"data: "):
            assert response.readline() == b"\n", "each frame is one data line and a blank line"
            yield json.loads(line[6:])


def test_progress_streams_as_sse_then_the_response_ends_the_stream(tools, jitter):
    count = 12 if jitter is None else jitter.randint(1, 200)
    connection, response = open_stream(tools, with_token(call("steps", id=5, count=count), "job-5"))
    try:
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        assert response.getheader("X-Accel-Buffering") == "no"
        frames = list(events(response))
    finally:
        connection.close()
    notes, answer = frames[:-1], frames[-1]
    assert [n["params"]["progress"] for n in notes] == list(range(1, count + 1))
    assert all(n["method"] == "notifications/progress" and n["params"]["progressToken"] == "job-5" for n in notes)
    assert answer["id"] == 5 and answer["result"]["content"][0]["text"] == f"{count} steps"


def test_without_a_token_or_without_sse_accepted_the_answer_is_plain_json(tools):
    for message, accept in ((call("steps", count=3), "application/json, text/event-stream"),
                            (with_token(call("steps", count=3), 1), "application/json")):
        connection, response = open_stream(tools, message, accept)
        try:
            assert response.status == 200 and response.getheader("Content-Type") == "application/json"
            assert json.loads(response.read())["result"]["content"][0]["text"] == "3 steps"
        finally:
            connection.close()


def test_an_error_with_its_own_status_is_never_inside_a_stream(tools):
    message = with_token(call("steps", count=3), "t")
    connection = tools.connection()
    try:
        headers = dict(mcp_headers(message), **SSE, **{"Mcp-Name": "other"})
        connection.request("POST", tools.path, body=json.dumps(message).encode(), headers=headers)
        response = connection.getresponse()
        assert response.status == 400 and response.getheader("Content-Type") == "application/json"
        assert json.loads(response.read())["error"]["code"] == -32020
    finally:
        connection.close()


def test_closing_the_stream_cancels_the_tool(tools, tmp_path, jitter):
    path = str(tmp_path / "ticks")
    stops = tools.stderr.count("ticker: stopped")  # the server is the module's: earlier tests' tickers stopped too
    connection, response = open_stream(tools, with_token(call("ticker", seconds=30, path=path), "t"))
    frames = events(response)
    for _ in range(3 if jitter is None else jitter.randint(1, 20)):
        assert next(frames)["method"] == "notifications/progress"
    connection.close()
    response.close()
    tools.wait_for_stderr("ticker: stopped", times=stops + 1)  # evidence the loop is over, not a guess
    stopped = read_text(path).count("tick")
    time.sleep(1)
    assert read_text(path).count("tick") == stopped, "the tool kept working after its client closed the stream"


def test_hanging_up_on_a_plain_json_request_cancels_it_too(tools, tmp_path, jitter):
    hanging_up_cancels(tools, tmp_path, jitter)


def test_without_epollrdhup_in_select_calls_work_and_hanging_up_still_cancels(tmp_path):
    """PyPy's select module has no EPOLLRDHUP: every HTTP tools/call answered 500 there (found by the lab's
    PyPy cells). This runs the same server with the constant taken away, on any interpreter."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import select\nif hasattr(select, 'EPOLLRDHUP'):\n"
                                           "    del select.EPOLLRDHUP\n")
    path = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    with HttpServer(SLOW_TOOLS, env={"PYTHONPATH": path}) as server:
        assert server.post(call("pid"))[0] == 200
        hanging_up_cancels(server, tmp_path)


def test_without_epoll_the_server_runs_on_poll_and_hanging_up_still_cancels(tmp_path):
    """The loop's portable fallback (select.poll), on any interpreter: epoll taken away."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import select\nif hasattr(select, 'epoll'):\n    del select.epoll\n")
    path = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    with HttpServer(SLOW_TOOLS, env={"PYTHONPATH": path}) as server:
        connection = server.connection()
        try:
            for number in range(20):  # keep-alive, handed between the loop and the workers
                assert server.post(call("pid", id=number), connection=connection)[2]["id"] == number
        finally:
            connection.close()
        connection, response = open_stream(server, with_token(call("steps", id=3, count=5), "p"))
        try:
            assert [frame.get("id") for frame in events(response)] == [None] * 5 + [3]
        finally:
            connection.close()
        hanging_up_cancels(server, tmp_path)


@pytest.mark.parametrize("half_close_first", [False, True])
def test_hanging_up_on_a_later_request_of_a_kept_alive_connection_cancels_it(tools, tmp_path, jitter,
                                                                            half_close_first):
    """Each request of a connection arms its own disconnect watch: whether the connection stayed with its
    worker between requests or went back to the loop, a hang-up during a later call still cancels that
    call, and so does a half-close and then a hang-up (the server probes the FIN with an interim 100)."""
    rounds = 6 if jitter is None else jitter.randint(1, 12)

    def earlier_requests(sock):
        for number in range(rounds):
            sock.sendall(raw_post(call("pid", id=number)))
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 200 and json.loads(response.read())["id"] == number
            if number % 2:
                time.sleep(0.05)  # past the worker's linger: the loop takes the connection back

    hanging_up_cancels(tools, tmp_path, jitter, before=earlier_requests, half_close_first=half_close_first)


def hanging_up_cancels(tools, tmp_path, jitter=None, before=None, half_close_first=False):
    path = str(tmp_path / "ticks")
    stops = tools.stderr.count("ticker: stopped")
    ticks = 3 if jitter is None else jitter.randint(1, 20)
    with socket.create_connection((tools.host, tools.port)) as hanging_up:
        if before is not None:
            before(hanging_up)
        hanging_up.sendall(raw_post(call("ticker", seconds=30, path=path)))
        deadline = time.monotonic() + 10
        while read_text(path).count("tick") < ticks:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if half_close_first:
            hanging_up.shutdown(socket.SHUT_WR)
            ticked = read_text(path).count("tick")
            deadline = time.monotonic() + 10
            while read_text(path).count("tick") < ticked + 5:  # a FIN alone cancels nothing: the client may still read
                assert time.monotonic() < deadline and tools.stderr.count("ticker: stopped") == stops
                time.sleep(0.01)
    tools.wait_for_stderr("ticker: stopped", times=stops + 1)
    stopped = read_text(path).count("tick")
    time.sleep(1)
    assert read_text(path).count("tick") == stopped


def test_quick_calls_from_20_clients_are_not_held_up_by_a_slow_one(tools, jitter, tmp_path):
    """An order, not a speed: 100 quick calls from 20 clients are all answered while one call still runs,
    and that one ends only when released (the latencies are make bench's, not a correctness test's)."""
    release = tmp_path / "release"
    held: list = []
    slow = threading.Thread(target=lambda: held.append(tools.post(call("held", path=str(release)))))
    slow.start()
    tools.wait_for_stderr("held: started")
    statuses, failures = [], []

    def client():
        for _ in range(5):
            if jitter is not None:
                time.sleep(jitter.uniform(0, 0.02))
            status, _, body = tools.post(call("pid"))
            statuses.append(status)
            if status != 200:
                failures.append(body)

    clients = [threading.Thread(target=client) for _ in range(20)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(60)
    assert failures == [] and len(statuses) == 100
    assert slow.is_alive() and held == [], "the held call ended before the quick ones were all answered"
    release.touch()
    slow.join(60)
    assert held[0][0] == 200 and held[0][2]["result"]["content"][0]["text"] == "released"


def test_sigterm_lets_an_open_stream_finish():
    with HttpServer(SLOW_TOOLS) as server:
        connection, response = open_stream(server, with_token(call("steps", id=9, count=10, pause=0.1), "s"))
        frames = events(response)
        assert next(frames)["params"]["progress"] == 1
        server.process.send_signal(signal.SIGTERM)
        rest = list(frames)
        connection.close()
        assert rest[-1]["id"] == 9 and rest[-1]["result"]["content"][0]["text"] == "10 steps"
        assert server.process.wait(10) == 0


@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
@pytest.mark.parametrize("worker", ["sync", "gthread"])
def test_under_gunicorn_progress_streams_and_closing_the_stream_cancels(worker, tmp_path):
    with gunicorn_server(f"mcpserver.http:create_app({SLOW_TOOLS!r})", "-w", "1", "-k", worker) as server:
        connection, response = open_stream(server, with_token(call("steps", count=4), "g"))
        assert response.getheader("Content-Type") == "text/event-stream"
        frames = list(events(response))
        connection.close()
        assert [f["params"]["progress"] for f in frames[:-1]] == [1, 2, 3, 4]
        path = str(tmp_path / "ticks")
        connection, response = open_stream(server, with_token(call("ticker", seconds=30, path=path), "t"))
        frames = events(response)
        next(frames)
        connection.close()
        response.close()
        time.sleep(0.5)
        stopped = read_text(path).count("tick")
        time.sleep(1)
        assert read_text(path).count("tick") <= stopped + 1, "under gunicorn, closing the stream did not cancel"
