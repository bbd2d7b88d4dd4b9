"""A legacy session's resource subscriptions over Streamable HTTP belong to the session (LEGACY.md §7): they
hold whether or not a GET stream is open, outlive a stream that drops, and end with the session."""

import os

import pytest
from legacy_http import LegacySession
from mcptest import EXAMPLES, HttpServer

NOTES = os.path.join(EXAMPLES, "notes.py")


@pytest.fixture(scope="module")
def server():
    with HttpServer(NOTES) as served:
        yield served


UPDATED = "notifications/resources/updated"  # what these tests look for; list changes of other tests' notes pass by


def updated(uri):
    return {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": uri}}


def test_a_subscription_made_before_the_get_stream_opens_holds(server):
    session = LegacySession(server)
    session.call("write_note", name="early", text="1")
    session.subscribe("notes://early")  # no GET stream yet: the session keeps it all the same
    stream = session.open()
    session.call("write_note", name="early", text="2")
    assert stream.next(UPDATED).message == updated("notes://early")
    stream.drop()


def test_dropping_the_get_stream_and_opening_it_again_keeps_every_subscription(server):
    session = LegacySession(server)
    first = session.open()  # open first: what is lost today is lost when it drops
    for name in ("kept-a", "kept-b"):
        session.call("write_note", name=name, text="1")
        session.subscribe(f"notes://{name}")
    session.call("write_note", name="kept-a", text="2")
    assert first.next(UPDATED).message == updated("notes://kept-a")
    first.drop()
    again = session.open()
    session.call("write_note", name="kept-b", text="2")
    session.call("write_note", name="kept-a", text="3")
    heard = [again.next(UPDATED).message, again.next(UPDATED).message]
    assert heard == [updated("notes://kept-b"), updated("notes://kept-a")]
    again.drop()


def test_an_unsubscribe_without_a_stream_open_holds_too(server):
    session = LegacySession(server)
    for name in ("gone", "stays"):
        session.call("write_note", name=name, text="1")
        session.subscribe(f"notes://{name}")
    session.open().drop()
    assert session.ask("resources/unsubscribe", uri="notes://gone") == {}
    stream = session.open()
    session.call("write_note", name="gone", text="2")
    session.call("write_note", name="stays", text="2")
    assert stream.next(UPDATED).message == updated("notes://stays")  # nothing for the one it left
    stream.drop()


def test_the_subscriptions_end_with_the_session(server):
    session = LegacySession(server)
    session.call("write_note", name="ending", text="1")
    session.subscribe("notes://ending")
    stream = session.open()
    assert session.delete() == 204
    rest = [event.method for event in stream.events()]  # what was on its way, then the end: DELETE ends it
    assert stream.closed and UPDATED not in rest, rest
    stream.drop()
    other = LegacySession(server)
    other.call("write_note", name="ending", text="2")  # nobody is left to hear it: the server goes on
    refused = session.open()
    assert refused.status == 404
    refused.drop()
