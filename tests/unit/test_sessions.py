"""Legacy HTTP sessions (LEGACY.md §4.3): a session id is the negotiated session, sealed; what lives in one
process is bounded."""

import logging

import pytest
from mcpserver import Context, Resource, Server, protocol
from mcpserver._context import Flight
from mcpserver._state import Sealer
from mcpserver.errors import InternalError
from mcpserver.legacy import LegacyPeer, LegacySession, SessionTable
from mcpserver.legacy._sessions import MAX_SUBSCRIPTIONS

SESSION = LegacySession("2025-06-18", {"sampling": {}}, {"name": "client", "version": "1"})


def table(**options):
    return SessionTable(Server("sessions"), Sealer("a key shared by replicas"), **options)


def test_a_session_id_opens_on_any_replica_with_the_key_and_only_for_its_principal():
    first, replica = table(), table()
    session_id = first.open(SESSION, "ada")
    assert all(0x21 <= ord(c) <= 0x7E for c in session_id)  # visible ASCII, as the header must be
    peer = replica.find(session_id, "ada")
    assert peer is not None and peer.session.revision == "2025-06-18"
    assert peer.session.client_capabilities == {"sampling": {}}
    assert replica.find(session_id, "bob") is None  # another principal's session is unknown


def test_forged_foreign_expired_and_ended_ids_are_unknown():
    sessions = table()
    session_id = sessions.open(SESSION, "")
    body, _, mac = session_id.rpartition(".")
    assert sessions.find(body + "." + mac[::-1], "") is None  # tampered
    assert SessionTable(Server("other"), Sealer("another key")).find(session_id, "") is None
    assert sessions.find("not-a-session", "") is None and sessions.find("a.b.c", "") is None
    sealer = Sealer("a key shared by replicas")
    assert sealer.open_value("session", sealer.seal_value("requestState-like", {"r": "2025-06-18"}, 60)) is None
    short = table(ttl=-1)
    assert short.find(short.open(SESSION, ""), "") is None  # expired
    sessions.end(session_id)
    assert sessions.find(session_id, "") is None


def test_ten_thousand_sessions_keep_a_bounded_living_state_oldest_reclaimed():
    sessions = table(max_states=100)
    ids = [sessions.open(SESSION, "") for _ in range(10_000)]
    peers = [sessions.find(session_id, "") for session_id in ids]
    assert len(sessions) == 100 and all(peer is not None for peer in peers)
    again = sessions.find(ids[0], "")  # reclaimed, not refused: a fresh living state for a valid id
    assert again is not None and again is not peers[0]


def test_a_client_that_refuses_the_servers_request_is_the_tools_is_error_not_a_server_fault(caplog):
    """ClientRefused is the client's answer (an error, a result that is no object, none in time): the tool's
    isError saying so, as a ToolError is, never a traceback logged as the tool's crash."""
    server = Server("asks")

    @server.tool()
    def confirm(ctx: Context) -> str:
        return str(ctx.elicit("Go on?"))

    peer = LegacyPeer(server, LegacySession("2025-06-18", {"elicitation": {}}, {}), None)
    refusals = iter([{"code": -1, "message": "the user said no"}, None])

    def client(message):  # the call's stream: the server's request goes out here, and the client answers it
        error = next(refusals)
        peer.answer(protocol.ClientResponse(message["id"], None if error else ["not", "an", "object"], error))

    call = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "confirm", "arguments": {}}}'
    for expected in ("The client answered elicitation/create with an error: 'the user said no'",
                     "The client's answer to elicitation/create is not an object"):
        with caplog.at_level(logging.INFO, logger="mcpserver"):
            reply = protocol.dispatch(protocol.parse(call), server, flight=Flight(client), peer=peer)
        assert reply.response["result"] == {"content": [{"type": "text", "text": expected}], "isError": True}
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_call_with_no_stream_to_the_client_is_told_it_cannot_ask_not_cancelled(caplog):
    """Over HTTP a POST that does not accept text/event-stream has no stream for the server's own request:
    the tool's isError says so. It was Cancelled, which the call was not: logged as the tool's crash."""
    server = Server("asks")

    @server.tool()
    def confirm(ctx: Context) -> str:
        return str(ctx.elicit("Go on?"))

    peer = LegacyPeer(server, LegacySession("2025-06-18", {"elicitation": {}}, {}), None)
    call = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "confirm", "arguments": {}}}'
    with caplog.at_level(logging.INFO, logger="mcpserver"):
        reply = protocol.dispatch(protocol.parse(call), server, flight=Flight(), peer=peer)
    assert reply.response["result"]["isError"] is True
    assert reply.response["result"]["content"][0]["text"].startswith("Cannot send elicitation/create: this request "
                                                                     "has no stream to the client")
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_subscription_holds_without_a_channel_and_ends_with_the_session():
    sessions = table()
    sessions.server.add_resource(Resource("notes://a", lambda: "a"))
    session_id = sessions.open(SESSION, "")
    peer = sessions.find(session_id, "")
    heard, ended = [], []
    peer.subscribe("notes://a", True)  # before any channel: kept
    peer.on_close(lambda: ended.append(True))
    peer.attach(heard.append)
    peer.detach(heard.append)  # the stream dropped: nothing is carried, the subscription stays
    sessions.server.resource_updated("notes://a")
    peer.attach(heard.append)
    sessions.server.resource_updated("notes://a")
    assert [m["params"]["uri"] for m in heard] == ["notes://a"]
    listening = len(sessions.server.subscriptions)
    peer.expires = 0  # its id has expired: the next request of anyone reclaims it, subscriptions and all
    sessions.find(sessions.open(SESSION, ""), "")
    assert ended == [True] and len(sessions.server.subscriptions) == listening - 1
    sessions.server.resource_updated("notes://a")
    assert len(heard) == 1


def test_a_session_subscribes_to_a_bounded_number_of_resources():
    peer = table().find(table().open(SESSION, ""), "")
    for n in range(MAX_SUBSCRIPTIONS):
        peer.subscribe(f"files://{n}", True)
    peer.subscribe("files://0", True)  # already held: not one more
    with pytest.raises(InternalError, match=f"at most {MAX_SUBSCRIPTIONS}"):
        peer.subscribe("files://one-too-many", True)
    peer.subscribe("files://0", False)
    peer.subscribe("files://one-too-many", True)
