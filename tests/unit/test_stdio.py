"""The stdio transport, over a real `python -m mcpserver` process on real pipes."""

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
from mcpserver import Server, stdio
from mcptest import (
    DEMO,
    MOVIES,
    SLOW_TOOLS,
    StdioServer,
    call,
    line,
    request,
    responses,
    run_once,
    run_signal_probe,
    server_command,
)


def test_discover_list_and_call_over_pipes():
    with StdioServer(MOVIES) as server:
        assert server.ask(request("server/discover"))["result"]["supportedVersions"] == ["2026-07-28"]
        assert [t["name"] for t in server.ask(request("tools/list", id=2))["result"]["tools"]] == [
            "search_movies", "book_tickets"]
        booking = server.ask(call("book_tickets", id=3, movie_id="m1", showtime="21:00", adults=4, children=2))
        assert booking["result"]["structuredContent"]["total_cents"] == round((4 * 1200 + 1200) * 0.9)
        assert server.ask(request("resources/read", id=4, uri="movies://films/m2"))["result"]["contents"][0]["uri"] \
            == "movies://films/m2"
        assert server.close()[0] == 0


def test_every_line_read_before_eof_is_answered():
    """`echo REQUEST | server`: the answer must come out before the process exits (the SDK loses it)."""
    for attempt in range(5):
        done = run_once(DEMO, line(call("echo", id=attempt, text="bye")))
        assert done.returncode == 0
        assert responses(done.stdout)[0]["result"]["content"][0]["text"] == "bye"


def test_pipelined_requests_are_all_answered_once():
    """Calls run concurrently and are answered in completion order; ids pair them."""
    data = b"".join(line(call("echo", id=i, text=str(i))) for i in range(300))
    done = run_once(DEMO, data)
    answers = responses(done.stdout)
    assert sorted(a["id"] for a in answers) == list(range(300))
    assert all(a["result"]["content"][0]["text"] == str(a["id"]) for a in answers)


def test_blank_lines_crlf_and_a_last_line_without_newline():
    data = b"\n   \n" + line(request("tools/list", id=1)).replace(b"\n", b"\r\n") + b"\n\t\n" + \
        line(request("tools/list", id=2)).rstrip(b"\n")
    assert [r["id"] for r in responses(run_once(DEMO, data).stdout)] == [1, 2]


def test_invalid_utf8_and_json_get_parse_errors_and_serving_goes_on():
    data = b"\xff\xfe garbage\n{not json\n" + line(request("tools/list", id=9))
    first, second, third = responses(run_once(DEMO, data).stdout)
    assert first == {"jsonrpc": "2.0", "error": first["error"]} and first["error"]["code"] == -32700
    assert "UTF-8" in first["error"]["message"]
    assert second["error"]["code"] == -32700
    assert third["id"] == 9 and "result" in third


def test_deep_nesting_gets_an_error_and_serving_goes_on():
    data = b"[" * 100_000 + b"]" * 100_000 + b"\n" + line(request("tools/list", id=2))
    first, second = responses(run_once(DEMO, data).stdout)
    assert first["error"]["code"] == -32700
    assert second["id"] == 2


def test_notifications_and_client_responses_get_no_answer():
    data = line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}) + \
        line({"jsonrpc": "2.0", "id": 5, "result": {}}) + line(request("tools/list", id=6))
    assert [r["id"] for r in responses(run_once(DEMO, data).stdout)] == [6]


def test_what_tools_print_goes_to_the_log_not_the_protocol():
    with StdioServer(SLOW_TOOLS) as server:
        answer = server.ask(call("chatty", text="clean"))
        assert answer["result"]["content"][0]["text"] == "clean"
        code, rest = server.close()
        assert code == 0 and rest == b""
        for printed in ("python print to stdout", "partial line without newline", "raw write to fd 1",
                        "child process output"):
            assert printed in server.stderr


def test_logs_go_to_stderr_or_a_file_never_stdout(tmp_path):
    done = run_once(DEMO, line(request("tools/list")))
    assert b"serving demo" in done.stderr and responses(done.stdout)[0]["id"] == 1
    log_file = tmp_path / "server.log"
    done = run_once(DEMO, line(request("tools/list")), "--log-file", str(log_file), "--log-level", "debug")
    assert done.stderr == b""
    assert "serving demo" in log_file.read_text()
    assert len(responses(done.stdout)) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_idle_exits_promptly_and_cleanly(signum):
    with StdioServer(DEMO) as server:
        assert "result" in server.ask(request("tools/list"))
        server.process.send_signal(signum)
        assert server.process.wait(10) == 0
        server.finish_stderr()
        assert "Traceback" not in server.stderr


# A signal's handler runs on the main thread, wherever that thread is: inside serve_stdio's wait for the session
# to end, perhaps holding a lock of the wait's own (threading.Event.wait holds one around its `return`). A handler
# that took that lock would wait for itself for ever (perhaps what a PyPy cell hit once). So: stop the server with a
# signal sent at the 1st line the wait runs (its callees' lines included), then at the 2nd, and so on, until one
# whole wait has run without reaching that line.
SIGNAL_AT_EVERY_LINE_OF_THE_WAIT = """
import inspect, io, os, sys
from mcpserver import Server, stdio

source, first = inspect.getsourcelines(stdio.serve_stdio)
WAIT_LINE = first + next(i for i, text in enumerate(source) if "ended.wait(" in text)


def in_the_wait(frame):
    caller = frame.f_back
    while caller is not None:
        if caller.f_code is stdio.serve_stdio.__code__:
            return caller.f_lineno == WAIT_LINE
        caller = caller.f_back
    return False


for nth in range(1, 1000):
    read_end, write_end = os.pipe()
    trace, state = signal_at_line(nth, in_the_wait, lambda frame: frame.f_back.f_code is stdio.serve_stdio.__code__,
                                  lambda: os.close(write_end))  # one whole wait ran with no signal: end it at EOF
    sys.settrace(trace)
    status = stdio.serve_stdio(Server("quiet"), os.fdopen(read_end, "rb"), io.BytesIO())
    sys.settrace(None)
    if status != 0:
        sys.exit(status)
    if not state["fired"]:
        break
    os.close(write_end)
print(f"stopped at each of the {nth - 1} lines of the wait", file=sys.stderr)
"""


def test_a_signal_at_any_line_of_the_main_threads_wait_stops_the_server():
    stderr = run_signal_probe(SIGNAL_AT_EVERY_LINE_OF_THE_WAIT, "a signal handler waited for the main thread, "
                              "which it runs on")
    assert b"stopped at each of the" in stderr and b"of the 0 lines" not in stderr


def test_a_signal_during_a_call_lets_the_answer_out_first():
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("slow", seconds=1.0)))
        server.wait_for_stderr("slow: started")
        server.process.send_signal(signal.SIGTERM)
        assert server.receive()["result"]["content"][0]["text"] == "slept"
        assert server.process.wait(5) == 0


def test_a_closed_stdout_ends_the_server_quietly():
    process = subprocess.Popen(server_command(DEMO), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()
    try:
        process.stdin.write(line(request("tools/list")) * 3)
        process.stdin.flush()
    except BrokenPipeError:
        pass
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert b"Traceback" not in stderr and b"stdout closed" in stderr


def test_an_oversized_line_is_refused_and_the_next_one_served(monkeypatch):
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 1000)
    server = Server("small")
    schema = {"type": "object", "properties": {"text": {}}, "required": ["text"]}
    server.tool(lambda text: text, name="echo", input_schema=schema)
    out = io.BytesIO()
    data = line(call("echo", text="x" * 5000)) + line(call("echo", id=2, text="fits"))
    assert stdio.serve_stdio(server, io.BytesIO(data), out) == 0
    first, second = responses(out.getvalue())
    assert first["error"]["code"] == -32600 and "longer than 1000 bytes" in first["error"]["message"]
    assert second["result"]["content"][0]["text"] == "fits"


def test_each_response_is_flushed_before_the_next_request_is_read():
    """Lock-step clients wait for an answer before they write again; buffering would deadlock them."""
    with StdioServer(DEMO) as server:
        for i in range(20):
            assert server.ask(call("echo", id=i, text="x" * (i * 1000)))["id"] == i


def test_an_older_client_probing_with_discover_gets_a_modern_error():
    """A dual-era client probes with server/discover at an older version and must see -32022."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2025-06-18", "io.modelcontextprotocol/clientCapabilities": {}}
    answer = responses(run_once(DEMO, line(request("server/discover", meta=meta))).stdout)[0]
    assert answer["error"]["code"] == -32022 and answer["error"]["data"]["requested"] == "2025-06-18"


def test_stdout_is_only_protocol_even_with_debug_logging():
    done = run_once(MOVIES, line(call("search_movies", query="blade")), "--log-level", "debug")
    for raw in done.stdout.splitlines():
        assert json.loads(raw)["jsonrpc"] == "2.0"


def test_the_server_runs_with_python_dash_i_when_installed():
    """Embedded the way the lab embeds it (site-packages), -I must still find it; on a dev checkout skip."""
    probe = subprocess.run([sys.executable, "-I", "-c", "import mcpserver"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("mcpserver is on PYTHONPATH here, not installed")
    done = subprocess.run([sys.executable, "-I", "-m", "mcpserver", DEMO], input=line(request("tools/list")),
                          capture_output=True, timeout=30, cwd=os.path.dirname(DEMO))
    assert responses(done.stdout)[0]["result"]["tools"]


class _Trickle(io.RawIOBase):
    """A stream that hands out at most `step` bytes a read, as a pipe does when the client writes slowly."""

    def __init__(self, data, step):
        self.data, self.step = data, step

    def readable(self):
        return True

    def readinto(self, buffer):
        piece, self.data = self.data[:min(self.step, len(buffer))], self.data[min(self.step, len(buffer)):]
        buffer[:len(piece)] = piece
        return len(piece)


@pytest.mark.parametrize("step", [1, 7, 64, 65536])
@pytest.mark.parametrize("limit", [1, 5, 16, 1000])
def test_the_line_reader_reads_what_readline_reads(step, limit):
    """stdio reads lines through _Lines (so that it knows when the next request is already in); it must cut
    and join them exactly as BufferedReader.readline(limit) does, whatever the chunks the pipe hands out."""
    data = b"".join([b"a\n", b"\n", b"x" * 40 + b"\n", b"tail" * 9, b"\n", b"no newline at the end"])
    expected, reference = [], io.BytesIO(data)
    while True:
        piece = reference.readline(limit)
        expected.append(piece)
        if not piece:
            break
    lines, got = stdio._Lines(io.BufferedReader(_Trickle(data, step))), []
    while True:
        piece = lines.readline(limit)
        got.append(piece)
        if not piece:
            break
    assert got == expected


@pytest.mark.parametrize("behind", [b"\n", line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                                    line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                          "params": {"requestId": 99}})])
def test_an_answer_is_not_held_while_the_server_waits_for_input(behind):
    """Answers to pipelined requests may wait to go out together, but never while the server waits for more
    input: not behind a line that gets no answer, nor behind half of a request."""
    with StdioServer(DEMO) as server:
        server.send(line(call("echo", id=1, text="first")) + behind)
        assert server.receive(timeout=20)["id"] == 1
        second, third = line(call("echo", id=2, text="second")), line(call("echo", id=3, text="third"))
        server.send(second[:20])
        server.send(second[20:] + third[:30])
        assert server.receive(timeout=20)["id"] == 2
        server.send(third[30:])
        assert server.receive(timeout=20)["id"] == 3


def test_an_answer_held_behind_a_slow_call_goes_out_when_the_call_is_handed_off(tmp_path):
    """A quick call's answer, held because a call behind it was already read, goes out once that call has
    run for HAND_OFF_AFTER, not when it ends."""
    release = tmp_path / "release"
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("pid", id=1)) + line(call("held", id=2, path=str(release))))
        assert server.receive(timeout=20)["id"] == 1  # while the held call still runs: it ends only below
        release.touch()
        assert server.receive(timeout=20)["result"]["content"][0]["text"] == "released"


def test_a_call_starting_as_the_watcher_goes_idle_leaves_slow_calls_handed_off():
    """The watcher clears its event as it goes idle; a quick call starting at that moment must not leave the
    event cleared with its flag up, or no later slow call would be handed off: a request read behind one would
    then wait for it. Here the quick call is written from inside the clear itself."""
    server = Server("t", "1")
    release = threading.Event()

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    def held() -> str:
        release.wait(60)
        return "released"

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    requests = os.fdopen(in_read, "rb", buffering=0)
    session = stdio._Session(server, requests, stdio._FdWriter(out_write), 16)
    answers: queue.Queue = queue.Queue()

    def collect():
        with os.fdopen(out_read, "rb") as lines:
            for text in lines:
                answers.put(json.loads(text))

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()

    cleared = threading.Event()

    class ClearedAsACallStarts(threading.Event):
        def clear(self):
            if not cleared.is_set():
                os.write(in_write, line(call("echo", id=1, text="quick")))
                try:  # answered at once only where the clear does not hold the session's lock
                    answers.put(answers.get(timeout=1))
                    time.sleep(0.1)  # the quick call has ended: the reader waits for input
                except queue.Empty:
                    pass
            super().clear()
            cleared.set()

    session._busy = ClearedAsACallStarts()
    try:
        session.start()
        assert cleared.wait(20)
        assert answers.get(timeout=20)["id"] == 1
        os.write(in_write, line(call("held", id=2)) + line(request("ping", id=3)))
        assert answers.get(timeout=20)["id"] == 3  # while the held call still runs: it ends only below
    finally:
        release.set()
        os.close(in_write)
        session.ended.wait(20)
    assert answers.get(timeout=20)["id"] == 2
    requests.close()
    os.close(out_write)
    collector.join(20)
