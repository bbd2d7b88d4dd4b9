"""Resumable legacy streams (LEGACY.md §4.4; 2025-11-25 transports, "Resumability and Redelivery"), driven by a
raw client that drops its stream at chosen points and resumes with Last-Event-ID: every event carries an id, a
resume replays exactly what followed, in order and without duplicates, an id that is not the session's replays
nothing and says so, and what the store could not keep is said too. 2026-07-28 streams are left as they were."""

import json

import pytest
from legacy_http import LegacySession, parse_events
from mcpserver.store import MAX_SESSION_EVENTS
from mcptest import RESUME_TOOLS, HttpServer, mcp_headers, request

UPDATED = "notifications/resources/updated"
PROGRESS = "notifications/progress"


@pytest.fixture(scope="module")
def server():
    with HttpServer(RESUME_TOOLS) as served:
        yield served


def counting(session, to, delay, token="t"):
    return {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
            "params": {"name": "count", "arguments": {"to": to, "delay": delay}, "_meta": {"progressToken": token}}}


def touch_plainly(session, uri, times):
    """touch, answered as plain JSON: no stream, so the session's store holds only the events the test counts."""
    message = {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
               "params": {"name": "touch", "arguments": {"uri": uri, "times": times}}}
    assert session.post(message, Accept="application/json")[0] == 200


def number(event):
    """(stream, number) of an event, or of an event id."""
    stream, _, n = (event if isinstance(event, str) else event.id).rpartition("-")
    return stream, int(n)


def test_every_event_of_a_2025_11_25_stream_has_an_id_and_the_stream_opens_with_a_priming_one(server):
    session = LegacySession(server)
    session.subscribe("res://ids")
    stream = session.open()
    primer = stream.next(skip_priming=False)
    assert primer.message is None and primer.retry == 1000 and number(primer)[1] == 0
    session.call("touch", uri="res://ids", times=3)
    heard = [stream.next(UPDATED) for _ in range(3)]
    assert [number(e) for e in heard] == [(number(primer)[0], n) for n in (1, 2, 3)]
    stream.drop()
    call = session.open("POST", counting(session, 2, 0))
    events = list(call.events())
    assert events[0].message is None and [e.method for e in events[1:]] == [PROGRESS, PROGRESS, None]
    assert [number(e)[1] for e in events] == [0, 1, 2, 3] and events[-1].message["result"]["content"]
    assert number(events[0])[0] != number(primer)[0]  # another stream: ids are unique across the session
    call.drop()


def test_older_revisions_get_ids_without_a_priming_event_and_a_quick_answer_stays_json(server):
    session = LegacySession(server, revision="2025-06-18")
    status, headers, body = session.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                          "params": {"name": "touch", "arguments": {"uri": "res://x"}}})
    assert status == 200 and headers["content-type"] == "application/json" and body["result"]
    session.subscribe("res://old")
    stream = session.open()
    session.call("touch", uri="res://old")
    event = stream.next(skip_priming=False)
    assert event.method == UPDATED and number(event)[1] == 1
    stream.drop()


def test_2026_07_28_streams_carry_no_ids(server):
    message = request("tools/call", 1, name="count", arguments={"to": 3, "delay": 0})
    message["params"]["_meta"]["progressToken"] = "p"
    status, headers, body = server.post(message, headers=mcp_headers(message))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert b"data: " in body and not any(line.startswith(b"id:") for line in body.split(b"\n"))


@pytest.mark.parametrize("read_before_drop", [0, 4, 10])
def test_a_dropped_get_stream_resumes_with_exactly_what_it_missed(server, read_before_drop):
    """10 updates sent, the client reads `read_before_drop` of them and drops; 6 more while it is away; the
    resume replays the 16 - read_before_drop it did not read, in order, none twice, then goes on live."""
    session = LegacySession(server)
    uri = f"res://get-{read_before_drop}"
    session.subscribe(uri)
    stream = session.open()
    last = stream.next(skip_priming=False).id
    session.call("touch", uri=uri, times=10)
    for _ in range(read_before_drop):
        last = stream.next(UPDATED).id
    stream.drop()
    session.call("touch", uri=uri, times=6)
    resumed = session.open(last_event_id=last)
    assert resumed.status == 200
    replayed = [resumed.next(UPDATED) for _ in range(16 - read_before_drop)]
    numbers = [number(event) for event in replayed]
    assert numbers == sorted(set(numbers)) and numbers[0] == (number(last)[0], number(last)[1] + 1)
    session.call("touch", uri=uri)  # live again: the next event is the new one, not a replayed one twice
    assert number(resumed.next(UPDATED)) == (numbers[-1][0], numbers[-1][1] + 1)
    resumed.drop()


@pytest.mark.parametrize("read_before_drop", [0, 5, 20])
def test_a_call_whose_stream_drops_goes_on_and_its_resume_replays_the_rest_and_its_response(server,
                                                                                            read_before_drop):
    """A call reporting 20 progress notifications; its POST stream dropped after the priming event and
    `read_before_drop` of them; a disconnect is not a cancel, so the call goes on, and the resume (a GET,
    whatever opened the stream) replays the 20 - read_before_drop others, then the response, and ends."""
    session = LegacySession(server)
    message = counting(session, 20, 0.02)
    stream = session.open("POST", message)
    last = stream.next(skip_priming=False).id
    seen = []
    for _ in range(read_before_drop):
        event = stream.next()
        seen.append(event.message["params"]["progress"])
        last = event.id
    stream.drop()
    resumed = session.open(last_event_id=last)
    rest = list(resumed.events())
    assert resumed.closed and rest[-1].message["id"] == message["id"]  # the response, and the stream's end
    assert rest[-1].message["result"]["content"][0]["text"] == "counted to 20"
    progress = [event.message["params"]["progress"] for event in rest[:-1]]
    assert seen + progress == list(range(1, 21)), (seen, progress)  # every one, once, in order
    resumed.drop()


def test_an_id_of_another_session_or_a_forged_one_replays_nothing_and_says_so(server):
    alice, mallory = LegacySession(server), LegacySession(server)
    alice.subscribe("res://alice")
    stream = alice.open()
    primer = stream.next(skip_priming=False).id
    alice.call("touch", uri="res://alice", times=2)
    stream.drop()
    stream_id = number(primer)[0]
    for forged in (primer, "0123456789abcdef-1", "garbage", f"{stream_id}-99999", f"{stream_id}--1", ""):
        refused = mallory.open(last_event_id=forged)
        body = json.loads(refused.response.read())
        assert refused.status == 400 and body["error"]["code"] == -32600, (forged, body)
        assert "names no event of this session" in body["error"]["message"] and "nothing was replayed" in \
            body["error"]["message"]
        refused.drop()
    for forged in (f"{stream_id}-99999", "garbage"):  # past its stream's end, or not an id at all: the same
        refused = alice.open(last_event_id=forged)
        assert refused.status == 400
        refused.drop()
    resumed = alice.open(last_event_id=primer)  # the owner's resume still works, and the refusals lost nothing
    assert [resumed.next(UPDATED).message["params"]["uri"] for _ in range(2)] == ["res://alice"] * 2
    resumed.drop()


def test_past_the_stores_bound_the_oldest_go_and_the_resume_says_what_to_read_again(server):
    """1,100 updates while the client is away, 100 more than a session keeps: the resume replays the 1,000
    kept, the newest, and then says to re-read every list and every subscribed resource."""
    session = LegacySession(server)
    session.subscribe("res://flood")
    stream = session.open()
    primer = stream.next(skip_priming=False).id
    stream.drop()
    touch_plainly(session, "res://flood", MAX_SESSION_EVENTS + 100)
    resumed = session.open(last_event_id=primer)
    replayed = [resumed.next() for _ in range(MAX_SESSION_EVENTS)]
    assert [number(e)[1] for e in replayed] == list(range(101, MAX_SESSION_EVENTS + 101))
    resync = [resumed.next().message for _ in range(3)]
    assert resync == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                      {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"},
                      {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": "res://flood"}}]
    resumed.drop()


def test_a_response_the_store_dropped_is_an_error_response_saying_so(server):
    session = LegacySession(server)
    message = counting(session, 1, 0)
    call = session.open("POST", message)
    primer = call.next(skip_priming=False).id
    call.drop()  # the call ends meanwhile, its response kept...
    session.subscribe("res://push")
    session.open().drop()
    touch_plainly(session, "res://push", MAX_SESSION_EVENTS)  # ... until the session's newer events push it out
    resumed = session.open(last_event_id=primer)
    events = list(resumed.events())
    assert resumed.closed and len(events) == 1 and events[0].message["id"] == message["id"]
    error = events[0].message["error"]
    assert error["code"] == -32603 and "dropped from the session's event store" in error["message"]
    resumed.drop()


def test_parse_events_reads_what_the_server_writes():
    (event,) = parse_events(b"id: abc-1\ndata: {\"a\": 1}\n\n")
    assert event.id == "abc-1" and event.message == {"a": 1}
