"""subscriptions/listen over HTTP: an SSE stream per listener, a slow one never holds up the rest."""

import json
import os
import signal
import socket
import threading

from mcptest import EXAMPLES, HttpServer, call, mcp_headers, raw_post, request

NOTES = os.path.join(EXAMPLES, "notes.py")
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


def listen_message(request_id, **notifications):
    return request("subscriptions/listen", request_id, notifications=notifications)


def open_listen(server, request_id, **notifications):
    message = listen_message(request_id, **notifications)
    connection = server.connection()
    connection.request("POST", server.path, body=json.dumps(message).encode(), headers=mcp_headers(message))
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    return connection, response


def frames(response):
    while True:
        line = response.readline()
        if not line:
            return
        if line.startswith(b"data: "):
            yield json.loads(line[6:])


def test_a_listener_stream_acknowledges_then_carries_what_it_asked_for(jitter):
    with HttpServer(NOTES) as server:
        assert server.post(call("write_note", name="todo", text="a"))[0] == 200
        connection, response = open_listen(server, "s1", toolsListChanged=True, resourceSubscriptions=["notes://todo"])
        stream = frames(response)
        ack = next(stream)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["notes://todo"]},
                                 "_meta": {SUBSCRIPTION: "s1"}}
        server.post(call("write_note", name="todo", text="b"))
        assert next(stream) == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                "params": {"uri": "notes://todo", "_meta": {SUBSCRIPTION: "s1"}}}
        server.post(call("enable_shouting"))
        assert next(stream)["method"] == "notifications/tools/list_changed"
        connection.close()


def test_a_listen_without_sse_accepted_is_406():
    with HttpServer(NOTES) as server:
        message = listen_message(1, toolsListChanged=True)
        status, _, _ = server.post(message, headers=dict(mcp_headers(message), Accept="application/json"))
        assert status == 406


def test_fifty_listeners_and_one_that_never_reads(jitter):
    listeners = 50 if jitter is None else jitter.randint(1, 60)
    with HttpServer(NOTES, "--max-listeners-per-peer", "64") as server:  # all of them come from 127.0.0.1
        server.post(call("write_note", name="hot", text="0"))
        stuck = socket.create_connection((server.host, server.port))
        message = listen_message("stuck", resourceSubscriptions=["notes://hot"])
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(raw_post(message))  # and never reads a byte of the answer
        opened = [open_listen(server, f"l{i}", resourceSubscriptions=["notes://hot"]) for i in range(listeners)]
        streams = [frames(response) for _, response in opened]
        for stream in streams:
            assert next(stream)["method"] == "notifications/subscriptions/acknowledged"
        for n in range(300):  # far more than the stuck client's socket buffers hold
            assert server.post(call("write_note", name="hot", text=str(n) * 200))[0] == 200
        quick = server.connection(timeout=10)  # held up by the stuck reader would mean never answered
        assert server.post(request("tools/list"), connection=quick)[0] == 200
        quick.close()
        for stream in streams:  # everyone else heard every change (or the latest ones, coalesced)
            note = next(stream)
            assert note["method"] == "notifications/resources/updated" and note["params"]["uri"] == "notes://hot"
        stuck.close()
        for connection, _ in opened:
            connection.close()


def test_sigterm_ends_open_streams_with_their_graceful_result(jitter):
    with HttpServer(NOTES) as server:
        connection, response = open_listen(server, "bye", resourcesListChanged=True)
        stream = frames(response)
        assert next(stream)["method"] == "notifications/subscriptions/acknowledged"
        results = []
        reader = threading.Thread(target=lambda: results.extend(stream))
        reader.start()
        server.process.send_signal(signal.SIGTERM)
        reader.join(10)
        assert server.process.wait(10) == 0
        assert results[-1]["id"] == "bye" and results[-1]["result"]["_meta"][SUBSCRIPTION] == "bye"
        connection.close()
