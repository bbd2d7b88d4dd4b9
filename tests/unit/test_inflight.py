"""Requests in flight over stdio: concurrency, cancellation, progress (a real server on real pipes)."""

import json
import os
import random
import signal
import subprocess
import time

import pytest
from mcptest import META, SLOW_TOOLS, StdioServer, call, line, read_text, responses, run_once


def cancel(request_id, **params):
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, **params}}


def with_token(message, token):
    message["params"]["_meta"] = dict(META, progressToken=token)
    return message


def ticks(path) -> int:
    return read_text(path).count("tick")


def test_quick_calls_are_not_held_up_by_a_slow_one(tmp_path):
    """An order, not a speed: 100 quick calls are all answered while one call is still running, and that
    call answers only when it is released (how fast they are is make bench's "quick calls beside a slow one")."""
    release = tmp_path / "release"
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("held", id="held", path=str(release))))
        server.wait_for_stderr("held: started")
        for i in range(100):
            assert server.ask(call("pid", id=i))["id"] == i  # the held call's answer never came in between
        release.touch()
        answer = server.receive(60)
        assert answer["id"] == "held" and answer["result"]["content"][0]["text"] == "released"


def test_a_cancelled_call_stops_and_is_never_answered(tmp_path):
    path = str(tmp_path / "ticks")
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("ticker", id=7, seconds=30, path=path)))
        server.wait_for_stderr("ticker: started")
        server.send(line(cancel(7, reason="user pressed stop")))
        server.wait_for_stderr("ticker: stopped")  # the loop is over: evidence, not a guess by sleeping
        stopped = ticks(path)
        time.sleep(1)
        assert ticks(path) == stopped, "the tool kept working after its cancel"
        assert server.ask(call("pid", id=8))["id"] == 8
        code, rest = server.close()
        assert code == 0 and all(answer["id"] != 7 for answer in responses(rest))


def test_a_tool_that_cannot_see_the_cancel_is_still_not_answered():
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("deaf", id="deaf", seconds=0.5)))
        server.wait_for_stderr("deaf: started")
        server.send(line(cancel("deaf")))
        time.sleep(1)
        assert server.ask(call("pid", id="next"))["id"] == "next"
        assert server.close() == (0, b"") and "finished anyway" not in server.stderr


def test_a_cancelled_command_tool_is_stopped_with_its_process_group(tmp_path):
    pidfile = str(tmp_path / "pid")
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(call("slow_command", id="cmd", pidfile=pidfile)))
        deadline = time.monotonic() + 10
        while not read_text(pidfile).strip():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        shell = int(read_text(pidfile))
        server.send(line(cancel("cmd")))
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{shell}"):
            assert time.monotonic() < deadline, "the cancelled program is still running (or a zombie)"
            time.sleep(0.02)
        assert server.ask(call("pid", id="after"))["id"] == "after"
        assert server.close() == (0, b"")


def test_progress_is_sent_only_for_a_token_strictly_increasing_and_before_the_answer(jitter):
    count = 20 if jitter is None else jitter.randint(1, 200)
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(with_token(call("steps", id=1, count=count), "tok-1")))
        seen = []
        while True:
            message = server.receive()
            if "id" in message:
                break
            seen.append(message)
        assert message["result"]["content"][0]["text"] == f"{count} steps"
        assert [m["method"] for m in seen] == ["notifications/progress"] * count
        assert all(m["params"]["progressToken"] == "tok-1" and m["params"]["total"] == count for m in seen)
        values = [m["params"]["progress"] for m in seen]
        assert values == sorted(set(values)) == list(range(1, count + 1))
        assert server.ask(call("steps", id=2, count=5))["id"] == 2  # no token: no notification came first
        assert server.close() == (0, b"")


def test_a_command_tool_turns_its_stderr_lines_into_progress(tmp_path):
    with StdioServer(SLOW_TOOLS) as server:
        server.send(line(with_token(call("slow_command", id=3, pidfile=str(tmp_path / "p")), 42)))
        notes = [server.receive() for _ in range(5)]
        assert [n["params"]["progress"] for n in notes] == [1, 2, 3, 4, 5]
        assert all(n["params"]["total"] == 600 and n["params"]["progressToken"] == 42 for n in notes)
        server.send(line(cancel(3)))


@pytest.mark.parametrize("notification", [
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5},
    {"jsonrpc": "2.0", "method": "notifications/cancelled"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": None}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
    {"jsonrpc": "2.0", "method": "notifications/unknown", "params": "junk"},
    {"jsonrpc": "2.0", "method": 5},
])
def test_no_notification_is_ever_answered_malformed_or_not(notification):
    done = run_once(SLOW_TOOLS, line(notification) + line(call("pid", id="next")))
    assert [answer.get("id") for answer in responses(done.stdout)] in (["next"], [None, "next"])
    if notification["method"] != 5:  # a non-string method is no notification at all: -32600 without an id
        assert [answer.get("id") for answer in responses(done.stdout)] == ["next"]


def test_eof_answers_every_call_that_was_read(jitter):
    seconds = [0.3 if jitter is None else jitter.uniform(0, 0.5) for _ in range(5)]
    data = b"".join(line(call("slow", id=i, seconds=seconds[i])) for i in range(5)) + line(call("pid", id="last"))
    done = run_once(SLOW_TOOLS, data)
    assert done.returncode == 0
    assert sorted(str(a["id"]) for a in responses(done.stdout)) == ["0", "1", "2", "3", "4", "last"]


def test_a_second_signal_cuts_the_grace_short():
    with StdioServer(SLOW_TOOLS, "--grace", "100") as server:
        server.send(line(call("slow", id="slow", seconds=100)))
        server.wait_for_stderr("slow: started")
        server.process.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # the first signal waits for the call: no exit yet
            server.process.wait(1)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(30) == 0  # the call and the grace both had 99 s to go
        assert server.close() == (0, b"")


def test_more_calls_than_slots_wait_in_order_and_all_are_answered(jitter):
    seconds = [0.2 if jitter is None else jitter.uniform(0, 0.3) for _ in range(6)]
    slots = "2" if jitter is None else str(jitter.randint(1, 5))
    data = b"".join(line(call("slow", id=i, seconds=seconds[i])) for i in range(6))
    done = run_once(SLOW_TOOLS, data, "--max-concurrent", slots)
    assert sorted(a["id"] for a in responses(done.stdout)) == list(range(6))


def test_lines_never_interleave_under_concurrent_progress_and_large_answers(jitter):
    steps = 50 if jitter is None else jitter.randint(1, 100)
    size = 200_000 if jitter is None else jitter.randint(1, 400_000)
    calls = []
    for i in range(30):
        calls.append(with_token(call("steps", id=f"s{i}", count=steps), f"t{i}"))
        calls.append(call("chatty", id=f"c{i}", text="x" * size))
    done = run_once(SLOW_TOOLS, b"".join(line(c) for c in calls), timeout=120)
    answers = [json.loads(raw) for raw in done.stdout.splitlines()]  # each line must be whole JSON
    assert sorted(a["id"] for a in answers if "id" in a) == sorted(c["id"] for c in calls)
    assert sum(1 for a in answers if a.get("method") == "notifications/progress") == 30 * steps


@pytest.mark.parametrize("seed", range(6))
def test_random_interleavings_of_calls_cancels_and_eof(seed, jitter):
    """Every call not cancelled is answered exactly once; a call cancelled while it runs never is; no
    notification follows its call's answer; every line is whole."""
    rng = random.Random(seed if jitter is None else jitter.randrange(2**32))
    slow_seconds = 0.05 if jitter is None else jitter.uniform(0, 0.2)
    script, quick, slow = [], set(), set()
    for i in range(40):
        kind = rng.choice(["quick", "quick", "slow", "cancel_slow", "cancel_unknown", "progress"])
        if kind == "quick":
            script.append(call("pid", id=i))
            quick.add(i)
        elif kind == "progress":
            script.append(with_token(call("steps", id=i, count=rng.randint(1, 8)), f"p{i}"))
            quick.add(i)
        elif kind == "slow":
            script.append(call("slow", id=i, seconds=slow_seconds))
            quick.add(i)
        elif kind == "cancel_slow":
            script.append(call("ticker", id=i, seconds=3, path=os.devnull))
            script.append(cancel(i))
            slow.add(i)
        else:
            script.append(cancel(10_000 + i))
    done = run_once(SLOW_TOOLS, b"".join(line(m) for m in script), "--max-concurrent", str(rng.randint(1, 8)),
                    timeout=120)
    assert done.returncode == 0
    messages = [json.loads(raw) for raw in done.stdout.splitlines()]
    answered = [m["id"] for m in messages if "id" in m]
    assert sorted(answered) == sorted(quick), (seed, set(answered) ^ quick)
    finished = set()
    for message in messages:
        if "id" in message:
            finished.add(f"p{message['id']}")
        else:
            assert message["params"]["progressToken"] not in finished, "progress after the answer"
